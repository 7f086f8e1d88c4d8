"""The embedding engine's asyncio adapter: ie.capnp frames on a UNIX socket.

It answers hello, ping, embed and rerank queries (rerank: cosine similarity of the
query's and each document's embedding). The forward pass runs in a worker thread so
the socket stays responsive; a cancel that arrives in time drops the answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import numpy as np

from neutrino.embedder.bert import BertEncoder
from neutrino.engine.batching import WriteBatcher
from neutrino.engine.codec import DecodeError, decode, encode
from neutrino.engine.framing import FrameDecoder, FrameTooLarge, FramingError
from neutrino.engine.messages import (
    Cancel,
    Capability,
    EmbedQuery,
    EmbedResult,
    EngineError,
    ErrorCode,
    Hello,
    HelloAck,
    Message,
    ModelInfo,
    Ping,
    Pong,
    RerankQuery,
    RerankResult,
)
from neutrino.engine.schema import PROTOCOL_VERSION

log = logging.getLogger("neutrino.embedder")
ENGINE_NAME = "neutrino-embedder/0.1.0"


class Embedder:
    """The model behind the socket (sans-IO apart from the CPU work)."""

    def __init__(self, encoder: BertEncoder, model: str, capacity: int = 64) -> None:
        self.encoder = encoder
        self.model = model
        self.capacity = capacity

    def hello_ack(self) -> HelloAck:
        info = ModelInfo(
            self.model,
            self.encoder.max_tokens,
            0,
            (Capability.EMBED, Capability.RERANK),
            self.encoder.dimensions,
        )
        return HelloAck(ENGINE_NAME, PROTOCOL_VERSION, [info], self.capacity)

    def _check(self, model: str, rows: list[list[int]]) -> EngineError | None:
        if model != self.model:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"this engine serves {self.model!r}")
        vocab = self.encoder.vocab_size
        if any(t >= vocab for row in rows for t in row):
            return EngineError(ErrorCode.INVALID_REQUEST, "token id beyond the vocabulary")
        return None

    def embed(self, q: EmbedQuery) -> EmbedResult | EngineError:
        err = self._check(q.model, q.inputs)
        if err is not None:
            return err
        dims = q.dimensions or self.encoder.dimensions
        if not q.inputs or dims > self.encoder.dimensions:
            return EngineError(ErrorCode.INVALID_REQUEST, "bad inputs or dimensions")
        vectors = self.encoder.embed(q.inputs, normalize=False)[:, :dims]
        if q.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        tokens = sum(min(len(i), self.encoder.max_tokens - 2) for i in q.inputs)
        return EmbedResult(dims, [float(v) for v in vectors.reshape(-1)], tokens)

    def rerank(self, q: RerankQuery) -> RerankResult | EngineError:
        err = self._check(q.model, [q.query, *q.documents])
        if err is not None:
            return err
        vectors = self.encoder.embed([q.query, *q.documents])
        scores = vectors[1:] @ vectors[0]
        tokens = len(q.query) * len(q.documents) + sum(len(d) for d in q.documents)
        return RerankResult([float(s) for s in scores], tokens)


class EngineProtocol(asyncio.Protocol):
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._decoder = FrameDecoder()
        self._out = WriteBatcher()
        self._transport: asyncio.Transport | None = None
        self._hello = False
        self._running: dict[int, asyncio.Task[None]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass it
        self._out.transport = self._transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._out.transport = None
        for task in self._running.values():
            task.cancel()

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._decoder.feed(data):
                self._dispatch(*decode(frame))
        except (FrameTooLarge, FramingError, DecodeError) as exc:
            self._out.send(encode(0, EngineError(ErrorCode.PROTOCOL, str(exc))))
            self._out.flush()
            if self._transport is not None:
                self._transport.close()

    def _dispatch(self, rid: int, msg: Message) -> None:
        if isinstance(msg, Hello):
            self._hello = msg.protocol_version == PROTOCOL_VERSION
            reply: Message = (
                self.embedder.hello_ack()
                if self._hello
                else EngineError(ErrorCode.PROTOCOL, "unsupported protocol version")
            )
            self._out.send(encode(0, reply))
        elif isinstance(msg, Ping):
            self._out.send(encode(0, Pong(msg.nonce)))
        elif isinstance(msg, Cancel):
            task = self._running.pop(rid, None)
            if task is not None:
                task.cancel()
        elif isinstance(msg, EmbedQuery | RerankQuery) and self._hello:
            if len(self._running) >= self.embedder.capacity:
                self._out.send(encode(rid, EngineError(ErrorCode.OVERLOADED, "at capacity")))
                return
            task = asyncio.get_running_loop().create_task(self._answer(rid, msg))
            self._running[rid] = task
        elif isinstance(msg, Pong):
            pass
        else:
            text = f"{type(msg).__name__} is not served by this engine"
            self._out.send(encode(rid, EngineError(ErrorCode.UNSUPPORTED, text)))

    async def _answer(self, rid: int, q: EmbedQuery | RerankQuery) -> None:
        work = self.embedder.embed if isinstance(q, EmbedQuery) else self.embedder.rerank
        try:
            result = await asyncio.to_thread(work, q)  # type: ignore[arg-type]
        except Exception as exc:
            log.exception("query %d failed", rid)
            result = EngineError(ErrorCode.INTERNAL, f"embedder failed: {type(exc).__name__}")
        if self._running.pop(rid, None) is not None:
            self._out.send(encode(rid, result))
