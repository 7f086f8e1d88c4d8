"""Shared by the modality services: a modality call's ``usage``."""

from __future__ import annotations

from neutrino.frontends.grpc.stubs import common_pb2
from neutrino.pipeline.call import ModalCall


def usage(call: ModalCall, completion_tokens: int = 0) -> common_pb2.Usage:
    """Token counts and phase times of a finished call, in the shared ``Usage``."""
    t = call.lifecycle.timings()
    return common_pb2.Usage(
        prompt_tokens=call.prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=call.prompt_tokens + completion_tokens,
        queue_time=t["queue_time"],
        prompt_time=t["prompt_time"],
        completion_time=t["completion_time"],
        total_time=t["total_time"],
    )
