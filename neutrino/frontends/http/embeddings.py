"""``POST /v1/embeddings`` (OpenAI) and ``POST /v1/rerank`` (the Cohere/Jina shape vLLM
and SGLang serve), over the engine's embed and rerank queries."""

from __future__ import annotations

import base64
from array import array
from typing import Any

from aiohttp import web

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
from neutrino.frontends.http.guard import caller, guarded
from neutrino.frontends.http.openai import json_response, read_json
from neutrino.frontends.http.parse import new_id
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS, checked_tokens
from neutrino.pipeline.models import ModelText
from neutrino.pipeline.orchestrator import Orchestrator


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


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
    elif isinstance(raw, list) and raw and all(_is_int(t) for t in raw):
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
        elif isinstance(item, list) and item and all(_is_int(t) and t >= 0 for t in item):
            continue
        else:
            raise bad_request(
                f"input[{i}] must be a non-empty string or array of token ids", "input"
            )
    return items


class EmbeddingRoutes:
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.cfg = cfg
        self.orch = orchestrator

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/embeddings", guarded(self.embeddings))
        app.router.add_post("/v1/rerank", guarded(self.rerank))
        app.router.add_post("/rerank", guarded(self.rerank))

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        body = await read_json(request, self.cfg.limits.max_body_bytes)
        model = _model(body)
        items = _inputs(body.get("input"))
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise bad_request("encoding_format must be 'float' or 'base64'", "encoding_format")
        dims = body.get("dimensions")
        if dims is not None and (not _is_int(dims) or dims < 1):
            raise bad_request("dimensions must be a positive integer", "dimensions")

        def build(text: ModelText, info: ModelInfo) -> tuple[EmbedQuery, int]:
            native = info.embedding_dimensions
            if dims is not None and native and dims > native:
                raise bad_request(f"dimensions must be at most {native} for {model}", "dimensions")
            ids = [checked_tokens(text, info, item, "input") for item in items]
            query = EmbedQuery(
                model,
                ids,
                dimensions=dims or 0,
                normalize=True,
                traceparent=request.headers.get("traceparent", ""),
            )
            return query, sum(len(i) for i in ids)

        call = await self.orch.call(
            principal=principal,
            request_id=new_id("embd"),
            model=model,
            capability=Capability.EMBED,
            build=build,
        )
        try:
            result = await call.result()
        finally:
            call.close()
        if not isinstance(result, EmbedResult) or len(result.rows()) != len(items):
            raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape")
        data = []
        for i, row in enumerate(result.rows()):
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
        body = await read_json(request, self.cfg.limits.max_body_bytes)
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
        if not _is_int(top_n) or top_n < 1:
            raise bad_request("top_n must be a positive integer", "top_n")
        return_documents = body.get("return_documents", True)
        if not isinstance(return_documents, bool):
            raise bad_request("return_documents must be a boolean", "return_documents")

        def build(text: ModelText, info: ModelInfo) -> tuple[RerankQuery, int]:
            q = checked_tokens(text, info, query, "query")
            ids = [checked_tokens(text, info, d, "documents") if d else [] for d in docs]
            traceparent = request.headers.get("traceparent", "")
            return RerankQuery(model, q, ids, traceparent), len(q) * len(ids) + sum(map(len, ids))

        rid = new_id("rerank")
        call = await self.orch.call(
            principal=principal,
            request_id=rid,
            model=model,
            capability=Capability.RERANK,
            build=build,
        )
        try:
            result = await call.result()
        finally:
            call.close()
        if not isinstance(result, RerankResult) or len(result.scores) != len(docs):
            raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape")
        order = sorted(range(len(docs)), key=lambda i: -result.scores[i])[:top_n]
        results = []
        for i in order:
            item: dict[str, Any] = {"index": i, "relevance_score": result.scores[i]}
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
