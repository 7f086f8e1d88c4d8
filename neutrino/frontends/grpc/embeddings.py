"""The ``neutrino.v1.Embeddings`` servicer: ``Embed`` and ``Rerank``.

The gRPC twins of ``POST /v1/embeddings`` and ``POST /v1/rerank``: the same limits, the
same checks in the same order and the same messages (params are the proto's field
names, which are HTTP's), the same engine queries and token counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from neutrino.config import Config
from neutrino.engine.messages import (
    Capability,
    EmbedQuery,
    EmbedResult,
    ModelInfo,
    RerankQuery,
    RerankResult,
)
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.frontends.grpc.calls import (
    Context,
    caller,
    closing,
    guarded,
    metadata,
    timeout_s,
)
from neutrino.frontends.grpc.convert import new_id
from neutrino.frontends.grpc.modal import one_result, usage
from neutrino.frontends.grpc.stubs import embeddings_pb2, embeddings_pb2_grpc
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS, checked_tokens
from neutrino.pipeline.models import ModelText
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
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.cfg = cfg
        self.orch = orchestrator

    async def Embed(
        self, request: embeddings_pb2.EmbedRequest, context: Context
    ) -> embeddings_pb2.EmbedResponse | None:
        async def run() -> embeddings_pb2.EmbedResponse:
            principal = caller(context, self.orch.keys)
            model = _model(request.model)
            items = embed_inputs(request)
            dims = dimensions(request)
            traceparent = metadata(context, "traceparent")

            def build(text: ModelText, info: ModelInfo) -> tuple[EmbedQuery, int]:
                native = info.embedding_dimensions
                if dims is not None and native and dims > native:
                    raise bad_request(
                        f"dimensions must be at most {native} for {model}", "dimensions"
                    )
                ids = [checked_tokens(text, info, item, "input") for item in items]
                query = EmbedQuery(
                    model, ids, dimensions=dims or 0, normalize=True, traceparent=traceparent
                )
                return query, sum(len(i) for i in ids)

            call = await self.orch.call(
                request_id=new_id("embd"),
                model=model,
                capability=Capability.EMBED,
                build=build,
                timeout_s=timeout_s(context, self.cfg),
                principal=principal,
            )
            result = await closing(context, call, lambda: one_result(call, EmbedResult))
            rows = result.rows()
            if len(rows) != len(items):
                raise NeutrinoError(
                    ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape"
                )
            return embeddings_pb2.EmbedResponse(
                id=call.request_id,
                model=model,
                created=call.created,
                embeddings=[
                    embeddings_pb2.Embedding(index=i, values=row) for i, row in enumerate(rows)
                ],
                usage=usage(call),
            )

        return await guarded(context, "Embed", run)

    async def Rerank(
        self, request: embeddings_pb2.RerankRequest, context: Context
    ) -> embeddings_pb2.RerankResponse | None:
        async def run() -> embeddings_pb2.RerankResponse:
            principal = caller(context, self.orch.keys)
            req = rerank_request(request)
            traceparent = metadata(context, "traceparent")

            def build(text: ModelText, info: ModelInfo) -> tuple[RerankQuery, int]:
                q = checked_tokens(text, info, req.query, "query")
                ids = [
                    checked_tokens(text, info, d, "documents") if d else [] for d in req.documents
                ]
                query = RerankQuery(req.model, q, ids, traceparent)
                return query, len(q) * len(ids) + sum(map(len, ids))

            call = await self.orch.call(
                request_id=new_id("rerank"),
                model=req.model,
                capability=Capability.RERANK,
                build=build,
                timeout_s=timeout_s(context, self.cfg),
                principal=principal,
            )
            result = await closing(context, call, lambda: one_result(call, RerankResult))
            docs = req.documents
            if len(result.scores) != len(docs):
                raise NeutrinoError(
                    ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape"
                )
            order = sorted(range(len(docs)), key=lambda i: -result.scores[i])[: req.top_n]
            results = []
            for i in order:
                r = embeddings_pb2.RerankResult(index=i, relevance_score=result.scores[i])
                if req.return_documents:
                    r.document = docs[i]
                results.append(r)
            return embeddings_pb2.RerankResponse(
                id=call.request_id,
                model=req.model,
                created=call.created,
                results=results,
                usage=usage(call),
            )

        return await guarded(context, "Rerank", run)
