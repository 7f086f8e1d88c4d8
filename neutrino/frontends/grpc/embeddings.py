"""The ``neutrino.v1.Embeddings`` servicer: ``Embed`` and ``Rerank``.

The gRPC twins of ``POST /v1/embeddings`` and ``POST /v1/rerank``: a request message is
translated into the same job, checked by the same rules (``pipeline/modal_rules.py``:
the proto's field names are HTTP's), and gets the same engine query and token counts.
"""

from __future__ import annotations

from neutrino.frontends.grpc.calls import Arrival, Context, Service
from neutrino.frontends.grpc.modal import usage
from neutrino.frontends.grpc.stubs import embeddings_pb2, embeddings_pb2_grpc
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS
from neutrino.pipeline.modalities import Embed
from neutrino.pipeline.modalities import Rerank as RerankJob

# ----------------------------------------------------------------------------- translation


def _input(item: embeddings_pb2.EmbedInput) -> str | list[int]:
    which = item.WhichOneof("input")
    if which == "text":
        return item.text
    return list(item.tokens.ids) if which == "tokens" else []


def embed_job(msg: embeddings_pb2.EmbedRequest, traceparent: str = "") -> Embed:
    """The embed job of an EmbedRequest (its rules are the HTTP API's: modal_rules)."""
    dims = msg.dimensions if msg.HasField("dimensions") else None
    inputs = [_input(item) for item in msg.input[: MAX_INPUTS + 1]]
    return rules.embed(msg.model, inputs, dims, traceparent)


def rerank_job(msg: embeddings_pb2.RerankRequest, traceparent: str = "") -> tuple[RerankJob, bool]:
    """The rerank job of a RerankRequest, and whether to return the documents."""
    top_n = msg.top_n if msg.HasField("top_n") else None
    docs = list(msg.documents[: MAX_DOCUMENTS + 1])
    job = rules.rerank(msg.model, msg.query, docs, top_n, traceparent)
    return job, msg.return_documents if msg.HasField("return_documents") else True


# ----------------------------------------------------------------------------- the service


class EmbeddingsService(Service, embeddings_pb2_grpc.EmbeddingsServicer):
    async def Embed(
        self, request: embeddings_pb2.EmbedRequest, context: Context
    ) -> embeddings_pb2.EmbedResponse | None:
        async def run(arrival: Arrival) -> embeddings_pb2.EmbedResponse:
            job = embed_job(request, arrival.traceparent)
            call, result = await self.answer(job, "embd", context, arrival)
            rows = job.rows(result)
            return embeddings_pb2.EmbedResponse(
                id=call.request_id,
                model=job.model,
                created=call.created,
                embeddings=[
                    embeddings_pb2.Embedding(index=i, values=row) for i, row in enumerate(rows)
                ],
                usage=usage(call),
            )

        return await self.guarded(context, "Embed", "embed", run)

    async def Rerank(
        self, request: embeddings_pb2.RerankRequest, context: Context
    ) -> embeddings_pb2.RerankResponse | None:
        async def run(arrival: Arrival) -> embeddings_pb2.RerankResponse:
            job, return_documents = rerank_job(request, arrival.traceparent)
            call, result = await self.answer(job, "rerank", context, arrival)
            ranked = job.ranked(result)
            results = []
            for i, score in ranked:
                r = embeddings_pb2.RerankResult(index=i, relevance_score=score)
                if return_documents:
                    r.document = job.documents[i]
                results.append(r)
            return embeddings_pb2.RerankResponse(
                id=call.request_id,
                model=job.model,
                created=call.created,
                results=results,
                usage=usage(call),
            )

        return await self.guarded(context, "Rerank", "rerank", run)
