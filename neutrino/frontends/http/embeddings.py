"""``POST /v1/embeddings`` (OpenAI) and ``POST /v1/rerank`` (the Cohere/Jina shape vLLM
and SGLang serve), over the engine's embed and rerank queries."""

from __future__ import annotations

import base64
from array import array
from typing import Any

from aiohttp import web

from neutrino.config import Config
from neutrino.errors import bad_request
from neutrino.frontends.common import is_int, new_id
from neutrino.frontends.http.exchange import json_response, read_json
from neutrino.frontends.http.guard import caller, guarded, received_at
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS
from neutrino.pipeline.modalities import Embed, Rerank
from neutrino.pipeline.orchestrator import Orchestrator


def _model(body: Any) -> str:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model is required and must be a string", "model")
    return model


def _inputs(raw: Any) -> list[str | list[int]]:
    """OpenAI's ``input``: a string, strings, a token array, or token arrays."""
    if isinstance(raw, str):
        items: list[Any] = [raw]
    elif isinstance(raw, list) and raw and all(is_int(t) for t in raw):
        items = [raw]
    elif isinstance(raw, list):
        items = raw
    else:
        raise bad_request("input must be a string, an array of strings or token arrays", "input")
    if not items:
        raise bad_request("input must not be empty", "input")
    if len(items) > MAX_INPUTS:
        raise bad_request(f"input accepts at most {MAX_INPUTS} items", "input")
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise bad_request(f"input[{i}] is an empty string", "input")
        elif isinstance(item, list) and item and all(is_int(t) and t >= 0 for t in item):
            continue
        else:
            raise bad_request(
                f"input[{i}] must be a non-empty string or array of token ids", "input"
            )
    return items


class EmbeddingRoutes:
    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", guarded(self.embeddings))
        app.router.add_post("/v1/rerank", guarded(self.rerank))
        app.router.add_post("/rerank", guarded(self.rerank))

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        body = await read_json(request, self.cfg.limits)
        model = _model(body)
        items = _inputs(body.get("input"))
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise bad_request("encoding_format must be 'float' or 'base64'", "encoding_format")
        dims = body.get("dimensions")
        if dims is not None and (not is_int(dims) or dims < 1):
            raise bad_request("dimensions must be a positive integer", "dimensions")

        job = Embed(model, items, dims, request.headers.get("traceparent", ""))
        call = await self.orch.call(
            job, received_ns=received_at(request), principal=principal, request_id=new_id("embd")
        )
        try:
            rows = job.rows(await call.result())
        finally:
            call.close()
        data = []
        for i, row in enumerate(rows):
            vector: Any = row
            if fmt == "base64":
                vector = base64.b64encode(array("f", row).tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        tokens = call.prompt_tokens
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def rerank(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        body = await read_json(request, self.cfg.limits)
        model = _model(body)
        query = body.get("query")
        if not isinstance(query, str) or not query:
            raise bad_request("query must be a non-empty string", "query")
        raw_docs = body.get("documents")
        if not isinstance(raw_docs, list) or not raw_docs:
            raise bad_request("documents must be a non-empty array", "documents")
        if len(raw_docs) > MAX_DOCUMENTS:
            raise bad_request(f"at most {MAX_DOCUMENTS} documents are accepted", "documents")
        docs: list[str] = []
        for i, d in enumerate(raw_docs):
            text = d.get("text") if isinstance(d, dict) else d
            if not isinstance(text, str):
                raise bad_request(
                    f"documents[{i}] must be a string or {{'text': ...}}", "documents"
                )
            docs.append(text)
        top_n = body.get("top_n", len(docs))
        if not is_int(top_n) or top_n < 1:
            raise bad_request("top_n must be a positive integer", "top_n")
        return_documents = body.get("return_documents", True)
        if not isinstance(return_documents, bool):
            raise bad_request("return_documents must be a boolean", "return_documents")

        job = Rerank(model, query, docs, top_n, request.headers.get("traceparent", ""))
        rid = new_id("rerank")
        call = await self.orch.call(
            job, received_ns=received_at(request), principal=principal, request_id=rid
        )
        try:
            ranked = job.ranked(await call.result())
        finally:
            call.close()
        results = []
        for i, score in ranked:
            item: dict[str, Any] = {"index": i, "relevance_score": score}
            if return_documents:
                item["document"] = {"text": docs[i]}
            results.append(item)
        return json_response(
            {
                "id": rid,
                "model": model,
                "usage": {"total_tokens": call.prompt_tokens},
                "results": results,
            }
        )
