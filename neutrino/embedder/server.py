"""The embedding engine: its model code and engine handler (the protocol's rules and
the socket are the shared engine side's, ``neutrino/engines/``).

It answers embed and rerank queries (rerank: cosine similarity of the
query's and each document's embedding). The forward pass runs in a worker thread so
the socket stays responsive; a cancel that arrives in time drops the answer.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from neutrino.embedder.bert import BertEncoder
from neutrino.engine.messages import (
    Capability,
    EmbedQuery,
    EmbedResult,
    EngineError,
    ErrorCode,
    HelloAck,
    ModelInfo,
    Query,
    RerankQuery,
    RerankResult,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.serve import ConnectionHandler, RequestTasks, ServerConnection
from neutrino.engines.session import not_served

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


class EmbedderHandler(ConnectionHandler[Embedder]):
    """One client connection's queries; the protocol's rules are the engine session's."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(embedder)
        self._running = RequestTasks()

    def start(self, rid: int, query: Query) -> EngineError | None:
        if not isinstance(query, EmbedQuery | RerankQuery):
            return not_served(query)
        if len(self._running) >= self.engine.capacity:
            return EngineError(ErrorCode.OVERLOADED, "at capacity")
        self._running.start(rid, self._answer(rid, query))
        return None

    def cancel(self, rid: int, reason: str) -> None:
        self._running.cancel(rid)

    def lost(self) -> None:
        self._running.cancel_all()

    async def _answer(self, rid: int, q: EmbedQuery | RerankQuery) -> None:
        work = self.engine.embed if isinstance(q, EmbedQuery) else self.engine.rerank
        try:
            result = await asyncio.to_thread(work, q)  # type: ignore[arg-type]
        except Exception as exc:
            log.exception("query %d failed", rid)
            result = EngineError(ErrorCode.INTERNAL, f"embedder failed: {type(exc).__name__}")
        if self._running.finish(rid) and self.conn is not None:
            self.conn.send(rid, result)


def connection(embedder: Embedder) -> ServerConnection:
    """A client connection's protocol object."""
    return EmbedderHandler(embedder).connect(batch_tokens=False)
