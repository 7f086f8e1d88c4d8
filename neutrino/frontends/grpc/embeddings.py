"""The ``neutrino.v1.Embeddings`` servicer: ``Embed`` and ``Rerank``.

The gRPC twins of ``POST /v1/embeddings`` and ``POST /v1/rerank``: the same limits, the
same checks in the same order and the same messages (params are the proto's field
names, which are HTTP's), the same engine queries and token counts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from neutrino.config import Config
from neutrino.errors import bad_request
from neutrino.frontends.common import new_id
from neutrino.frontends.grpc.calls import (
    Context,
    caller,
    closing,
    guarded,
    metadata,
    refusals,
    timeout_s,
)
from neutrino.frontends.grpc.modal import usage
from neutrino.frontends.grpc.stubs import embeddings_pb2, embeddings_pb2_grpc
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS
from neutrino.pipeline.modalities import Embed
from neutrino.pipeline.modalities import Rerank as RerankJob
from neutrino.pipeline.orchestrator import Orchestrator

# ----------------------------------------------------------------------------- validation


def _model(model: str) -> str:
    if not model:
        raise bad_request("model is required and must be a string", "model")
    return model


def embed_inputs(msg: embeddings_pb2.EmbedRequest) -> list[str | list[int]]:
    """The inputs, each a non-empty text or non-empty token ids (raises BAD_REQUEST)."""
    if not msg.input:
        raise bad_request("input must not be empty", "input")
    if len(msg.input) > MAX_INPUTS:
        raise bad_request(f"input accepts at most {MAX_INPUTS} items", "input")
    items: list[str | list[int]] = []
    for i, item in enumerate(msg.input):
        which = item.WhichOneof("input")
        if which == "text":
            if not item.text:
                raise bad_request(f"input[{i}] is an empty string", "input")
            items.append(item.text)
        elif which == "tokens" and item.tokens.ids:
            items.append(list(item.tokens.ids))
        else:
            raise bad_request(
                f"input[{i}] must be a non-empty string or array of token ids", "input"
            )
    return items


def dimensions(msg: embeddings_pb2.EmbedRequest) -> int | None:
    if not msg.HasField("dimensions"):
        return None
    if msg.dimensions < 1:
        raise bad_request("dimensions must be a positive integer", "dimensions")
    return msg.dimensions


@dataclass(frozen=True, slots=True)
class Rerank:
    model: str
    query: str
    documents: list[str]
    top_n: int
    return_documents: bool


def rerank_request(msg: embeddings_pb2.RerankRequest) -> Rerank:
    model = _model(msg.model)
    if not msg.query:
        raise bad_request("query must be a non-empty string", "query")
    if not msg.documents:
        raise bad_request("documents must be a non-empty array", "documents")
    if len(msg.documents) > MAX_DOCUMENTS:
        raise bad_request(f"at most {MAX_DOCUMENTS} documents are accepted", "documents")
    docs = list(msg.documents)
    top_n = msg.top_n if msg.HasField("top_n") else len(docs)
    if top_n < 1:
        raise bad_request("top_n must be a positive integer", "top_n")
    return_documents = msg.return_documents if msg.HasField("return_documents") else True
    return Rerank(model, msg.query, docs, top_n, return_documents)


# ----------------------------------------------------------------------------- the service


class EmbeddingsService(embeddings_pb2_grpc.EmbeddingsServicer):
    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator

    async def Embed(
        self, request: embeddings_pb2.EmbedRequest, context: Context
    ) -> embeddings_pb2.EmbedResponse | None:
        async def run() -> embeddings_pb2.EmbedResponse:
            received = time.monotonic_ns()
            principal = caller(context, self.orch.keys)
            model = _model(request.model)
            items = embed_inputs(request)
            dims = dimensions(request)
            traceparent = metadata(context, "traceparent")

            job = Embed(model, items, dims, traceparent)
            call = await self.orch.call(
                job,
                request_id=new_id("embd"),
                timeout_s=timeout_s(context, self.cfg),
                principal=principal,
                protocol="grpc",
                received_ns=received,
            )
            rows = job.rows(await closing(context, call, call.result))
            return embeddings_pb2.EmbedResponse(
                id=call.request_id,
                model=model,
                created=call.created,
                embeddings=[
                    embeddings_pb2.Embedding(index=i, values=row) for i, row in enumerate(rows)
                ],
                usage=usage(call),
            )

        return await guarded(context, "Embed", run, refusals(self.orch, "embed"))

    async def Rerank(
        self, request: embeddings_pb2.RerankRequest, context: Context
    ) -> embeddings_pb2.RerankResponse | None:
        async def run() -> embeddings_pb2.RerankResponse:
            received = time.monotonic_ns()
            principal = caller(context, self.orch.keys)
            req = rerank_request(request)
            traceparent = metadata(context, "traceparent")

            job = RerankJob(req.model, req.query, req.documents, req.top_n, traceparent)
            call = await self.orch.call(
                job,
                request_id=new_id("rerank"),
                timeout_s=timeout_s(context, self.cfg),
                principal=principal,
                protocol="grpc",
                received_ns=received,
            )
            ranked = job.ranked(await closing(context, call, call.result))
            results = []
            for i, score in ranked:
                r = embeddings_pb2.RerankResult(index=i, relevance_score=score)
                if req.return_documents:
                    r.document = req.documents[i]
                results.append(r)
            return embeddings_pb2.RerankResponse(
                id=call.request_id,
                model=req.model,
                created=call.created,
                results=results,
                usage=usage(call),
            )

        return await guarded(context, "Rerank", run, refusals(self.orch, "rerank"))
