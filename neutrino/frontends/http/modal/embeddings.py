"""``POST /v1/embeddings`` (OpenAI) and ``POST /v1/rerank`` (the Cohere/Jina shape vLLM
and SGLang serve), over the engine's embed and rerank queries."""

from __future__ import annotations

import base64
from array import array

from aiohttp import web

from neutrino.errors import bad_request
from neutrino.frontends.common import new_id
from neutrino.frontends.http.exchange import json_response, read_json
from neutrino.frontends.http.guard import caller
from neutrino.frontends.http.modal import answered
from neutrino.frontends.http.routes import AiohttpHandler, RouteGroup
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.fields import is_int
from neutrino.pipeline.inputs import MAX_DOCUMENTS
from neutrino.pipeline.modalities import Embed, Rerank


def _body(body: object) -> dict[str, object]:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


def _inputs(raw: object) -> list[object]:
    """OpenAI's ``input``: a string, strings, a token array, or token arrays (each item is
    checked by the embed job's rules)."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(is_int(t) for t in raw):
        return [raw]
    if isinstance(raw, list):
        return raw
    raise bad_request("input must be a string, an array of strings or token arrays", "input")


def _documents(raw: object) -> list[str]:
    """The Cohere/Jina ``documents``: strings or ``{"text": ...}`` objects."""
    if not isinstance(raw, list):
        return []  # the rerank job's rules refuse it
    docs: list[str] = []
    for i, d in enumerate(raw[: MAX_DOCUMENTS + 1]):
        text = d.get("text") if isinstance(d, dict) else d
        if not isinstance(text, str):
            raise bad_request(f"documents[{i}] must be a string or {{'text': ...}}", "documents")
        docs.append(text)
    return docs


def embed_job(body: object, traceparent: str = "") -> tuple[Embed, str]:
    """The embed job of an OpenAI embeddings body, and its ``encoding_format``."""
    body = _body(body)
    job = rules.embed(
        body.get("model"), _inputs(body.get("input")), body.get("dimensions"), traceparent
    )
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise bad_request("encoding_format must be 'float' or 'base64'", "encoding_format")
    return job, fmt


def rerank_job(body: object, traceparent: str = "") -> tuple[Rerank, bool]:
    """The rerank job of a Cohere/Jina rerank body, and whether to return the documents."""
    body = _body(body)
    docs = _documents(body.get("documents"))
    job = rules.rerank(body.get("model"), body.get("query"), docs, body.get("top_n"), traceparent)
    return_documents = body.get("return_documents", True)
    if not isinstance(return_documents, bool):
        raise bad_request("return_documents must be a boolean", "return_documents")
    return job, return_documents


class EmbeddingRoutes(RouteGroup):
    def aiohttp_routes(self) -> list[tuple[str, str, AiohttpHandler]]:
        return [
            ("POST", "/v1/embeddings", self.embeddings),
            ("POST", "/v1/rerank", self.rerank),
            ("POST", "/rerank", self.rerank),
        ]

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        traceparent = request.headers.get("traceparent", "")
        job, fmt = embed_job(await read_json(request, self.cfg.limits), traceparent)
        call, result = await answered(self.orch, request, job, principal, new_id("embd"))
        rows = job.rows(result)
        data = []
        for i, row in enumerate(rows):
            vector: object = row
            if fmt == "base64":
                vector = base64.b64encode(array("f", row).tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        tokens = call.prompt_tokens
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": job.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def rerank(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        traceparent = request.headers.get("traceparent", "")
        job, return_documents = rerank_job(await read_json(request, self.cfg.limits), traceparent)
        rid = new_id("rerank")
        call, result = await answered(self.orch, request, job, principal, rid)
        ranked = job.ranked(result)
        results = []
        for i, score in ranked:
            item: dict[str, object] = {"index": i, "relevance_score": score}
            if return_documents:
                item["document"] = {"text": job.documents[i]}
            results.append(item)
        return json_response(
            {
                "id": rid,
                "model": job.model,
                "usage": {"total_tokens": call.prompt_tokens},
                "results": results,
            }
        )
