"""The generated ``neutrino.v1`` modules, with a clear error when they were never built."""

from __future__ import annotations

from neutrino.frontends.grpc.codegen import not_generated

try:
    from neutrino.v1 import (
        audio_pb2,
        audio_pb2_grpc,
        common_pb2,
        embeddings_pb2,
        embeddings_pb2_grpc,
        inference_pb2,
        inference_pb2_grpc,
        reflection_pb2,
        reflection_pb2_grpc,
        vision_pb2,
        vision_pb2_grpc,
    )
except ModuleNotFoundError as exc:  # pragma: no cover - a checkout that skipped `make`
    raise not_generated(exc, "gRPC", ", or set [grpc] enabled = false") from exc

__all__ = [
    "audio_pb2",
    "audio_pb2_grpc",
    "common_pb2",
    "embeddings_pb2",
    "embeddings_pb2_grpc",
    "inference_pb2",
    "inference_pb2_grpc",
    "reflection_pb2",
    "reflection_pb2_grpc",
    "vision_pb2",
    "vision_pb2_grpc",
]
