"""vLLM's ``AsyncLLM`` behind the engine protocol: token ids in, token ids out.

vLLM does not tokenize or detokenize (token ids in, ``detokenize=False``): Neutrino
templates, tokenizes, detokenizes and parses. vLLM loads the model's tokenizer only when
the model's folder has one, for what needs it: structured outputs compile their grammar
over the vocabulary's strings (without it, ``skip_tokenizer_init`` and guided queries
are refused as unsupported). Each query is one ``generate`` of a ``TokensPrompt`` with delta
outputs; every delta is queued on its connection as it arrives, and what one turn of the
event loop gathered for all requests leaves as one ``tokenBatch`` frame (the session
merges them). A cancel cancels the query's task, which aborts the request in vLLM.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

from neutrino.engine.messages import (
    Capability,
    EngineError,
    ErrorCode,
    HelloAck,
    ModelInfo,
    Query,
    TextQuery,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.serve import ConnectionHandler, RequestTasks, ServerConnection
from neutrino.engines.session import text_query
from neutrino.engines.vllm.mapping import (
    prompt_ids,
    result_of,
    sampling_kwargs,
    structured_kwargs,
)

log = logging.getLogger("neutrino.engines.vllm")

ENGINE_NAME = "neutrino-vllm/0.1.0"


class VllmEngine:
    """One ``AsyncLLM`` serving ``name`` to every connection."""

    def __init__(
        self,
        llm: Any,
        name: str,
        capacity: int,
        stats_path: str | None = None,
        grammars: bool = False,
    ) -> None:
        self.llm = llm
        self.grammars = grammars  # vLLM has the model's tokenizer, for structured outputs
        self.name = name
        self.capacity = capacity
        self.context = int(llm.model_config.max_model_len)
        self.vocab = int(llm.model_config.get_vocab_size())
        self._connections = itertools.count(1)
        self._stats_path = stats_path
        self.counts = {"queries": 0, "finished": 0, "cancelled": 0, "errors": 0}

    def count(self, what: str) -> None:
        """Count an event and rewrite the stats file: these counts, and the requests vLLM
        itself still holds (a cancelled one must not stay)."""
        self.counts[what] += 1
        if self._stats_path is None:
            return
        doc = {**self.counts, "unfinished": self.llm.output_processor.get_num_unfinished_requests()}
        tmp = self._stats_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, self._stats_path)

    def hello_ack(self) -> HelloAck:
        info = ModelInfo(self.name, self.context, 0, (Capability.GENERATE,))
        # Moved answers go on here, except guided ones (mapping.py).
        return HelloAck(ENGINE_NAME, PROTOCOL_VERSION, [info], self.capacity, continues=True)

    def check(self, q: TextQuery) -> EngineError | None:
        """What is refused before vLLM sees it."""
        if q.model != self.name:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"this engine serves {self.name!r}")
        if q.images:
            return EngineError(ErrorCode.UNSUPPORTED, "this engine takes no images")
        prompt = q.prompt_tokens
        if not prompt:
            return EngineError(ErrorCode.INVALID_REQUEST, "the prompt is empty")
        if q.forced_tokens and len(q.forced_tokens) >= q.sampling.max_tokens:
            return EngineError(ErrorCode.INVALID_REQUEST, "the forced tokens reach max_tokens")
        if q.forced_tokens and q.guided is not None and q.guided.mode:
            return EngineError(
                ErrorCode.UNSUPPORTED, "a guided answer cannot go on here (forced tokens)"
            )
        if len(prompt) + q.sampling.max_tokens > self.context:
            return EngineError(
                ErrorCode.CONTEXT_LENGTH,
                f"the prompt has {len(prompt)} tokens and {q.sampling.max_tokens} more were "
                f"asked for; this engine's context is {self.context}",
            )
        if min(prompt) < 0 or max(prompt) >= self.vocab or _outside(q.forced_tokens, self.vocab):
            return EngineError(ErrorCode.INVALID_REQUEST, "a token id is outside the vocabulary")
        if q.guided is not None and q.guided.mode and not self.grammars:
            return EngineError(
                ErrorCode.UNSUPPORTED,
                "structured output needs the model's tokenizer, which its folder does not have",
            )
        return None

    def connection(self) -> ServerConnection:
        return VllmHandler(self, next(self._connections)).connect()


class VllmHandler(ConnectionHandler[VllmEngine]):
    """One client connection's queries, each a ``generate`` task."""

    def __init__(self, engine: VllmEngine, conn_id: int) -> None:
        super().__init__(engine)
        self.conn_id = conn_id
        self._tasks = RequestTasks()

    def start(self, rid: int, query: Query) -> EngineError | None:
        text = text_query(query, self.engine.check)
        if isinstance(text, EngineError):
            return text
        if len(self._tasks) >= self.engine.capacity:
            return EngineError(ErrorCode.OVERLOADED, "the engine is at capacity")
        self._tasks.start(rid, self._run(rid, text))
        self.engine.count("queries")
        return None

    async def _run(self, rid: int, query: TextQuery) -> None:
        from vllm.exceptions import VLLMValidationError
        from vllm.inputs import TokensPrompt

        conn = self.conn
        assert conn is not None
        top = query.sampling.top_logprobs if query.sampling.logprobs else 0
        generated = 0
        forced = len(query.forced_tokens)
        prompt = TokensPrompt(prompt_token_ids=prompt_ids(query))
        try:
            params = _params(query)
            async for out in self.engine.llm.generate(prompt, params, f"{self.conn_id}-{rid}"):
                result = result_of(out, top, generated, forced)
                generated += len(result.tokens)
                conn.send(rid, result)
                if out.finished:
                    self.engine.count("finished")
                    return
        except asyncio.CancelledError:
            # vLLM's generate aborts the request as the cancel passes through it.
            asyncio.get_running_loop().call_soon(self.engine.count, "cancelled")
            raise
        except (ValueError, TypeError, VLLMValidationError) as exc:
            self.engine.count("errors")
            conn.send(rid, EngineError(ErrorCode.INVALID_REQUEST, str(exc)))
        except Exception as exc:
            log.exception("request %d on connection %d failed", rid, self.conn_id)
            self.engine.count("errors")
            conn.send(rid, EngineError(ErrorCode.INTERNAL, f"vLLM failed: {exc}"))
        finally:
            self._tasks.finish(rid)

    def cancel(self, rid: int, reason: str) -> None:
        self._tasks.cancel(rid)

    def lost(self) -> None:
        self._tasks.cancel_all()


def _outside(ids: Sequence[int], vocab: int) -> bool:
    return bool(ids) and (min(ids) < 0 or max(ids) >= vocab)


def _params(query: TextQuery) -> Any:
    """vLLM's ``SamplingParams`` for ``query``: delta outputs, ids only."""
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

    structured = structured_kwargs(query)
    return SamplingParams(
        **sampling_kwargs(query),
        output_kind=RequestOutputKind.DELTA,
        structured_outputs=StructuredOutputsParams(**structured) if structured else None,
    )
