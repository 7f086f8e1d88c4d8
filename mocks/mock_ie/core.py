"""Sans-IO core of the mock inference engine: validation and deterministic generation.

No I/O and no asyncio here: ``MockEngine.start`` turns a ``TextQuery`` into a
``MockGeneration`` (or an ``EngineError``) and ``MockGeneration.next`` hands out one
frame's worth of tokens at a time. The asyncio server in ``server.py`` drives it over a
socket; Neutrino's tests can also drive it in-process as a fake engine.

Replies are deterministic: a stable hash (BLAKE2b) of the prompt ids and the seed picks
where in the built-in corpus the reply starts, how long it is and every logprob.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from mocks.mock_ie import corpus
from mocks.mock_ie.json_instance import instance
from mocks.mock_ie.memory import MockMemory
from mocks.mock_ie.regex_instance import RegexTooHard, regex_instance
from mocks.mock_ie.script import Rule, Script
from neutrino.engine.messages import (
    Capability,
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    HelloAck,
    Message,
    ModalQuery,
    ModelInfo,
    ModelState,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.arrays import pack_u32
from neutrino.engine.wire.schema import PROTOCOL_VERSION

ENGINE_NAME = "mock_ie/0.1.0"
MIN_REPLY_TOKENS = 8
MAX_REPLY_TOKENS = 48
MAX_TOP_LOGPROBS = 20
_MAX_ID = 2**32 - 1


class Tokenizer(Protocol):
    """What the mock needs from a tokenizer (``neutrino.text`` tokenizers qualify)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def load_tokenizer(name: str) -> Tokenizer:
    """Load a named tokenizer from Neutrino's registry."""
    from neutrino.text.registry import load_tokenizer as _load

    return _load(name)


@dataclass(frozen=True)
class MockModel:
    name: str
    tokenizer: str
    context_length: int = 32768
    capabilities: tuple[Capability, ...] = (Capability.GENERATE,)
    embedding_dimensions: int = 0
    audio_sample_rate: int = 0  # a transcribe model's: the rate its audio must have


@dataclass(frozen=True)
class Fault:
    """Misbehaviour the server must act out instead of sending the next frame."""

    kind: Literal["drop", "error", "stall"]
    code: ErrorCode = ErrorCode.INTERNAL
    message: str = "injected fault"


def _f32(values: list[float]) -> list[float]:
    """Round to float32 so in-process values equal the ones that cross the wire."""
    return array("f", values).tolist()


def _guided_refusal(guided: Guided | None) -> EngineError | None:
    """The error for a constraint the mock cannot decode under (never ignore one)."""
    if guided is None:
        return None
    if guided.mode is GuidedMode.GRAMMAR:
        return EngineError(ErrorCode.UNSUPPORTED, "mock_ie cannot decode under a grammar")
    if guided.mode is GuidedMode.CHOICE and not guided.choices:
        return EngineError(ErrorCode.INVALID_REQUEST, "a choice constraint needs choices")
    if guided.mode is GuidedMode.REGEX:
        try:
            regex_instance(guided.pattern)
        except (RegexTooHard, re.error) as exc:
            return EngineError(ErrorCode.UNSUPPORTED, str(exc))
    return None


def _request_key(prompt: Sequence[int], seed: int | None) -> bytes:
    h = hashlib.blake2b(b"mock_ie/v1\0", digest_size=32)
    h.update(pack_u32(list(prompt)))
    if seed is None:
        h.update(b"\xff" * 9)
    else:
        h.update(b"\x00" + (seed & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))
    return h.digest()


class MockGeneration:
    """One request's token stream. Drive it with ``next()`` until ``done``."""

    __slots__ = (
        "_created_ns",
        "_fault",
        "_fault_at",
        "_finish",
        "_first_ns",
        "_k",
        "_logprobs",
        "_pause",
        "_pool",
        "_pos",
        "_rng",
        "_stalled",
        "_stop_token_id",
        "_tokens",
        "_tpf",
        "done",
        "prompt_tokens",
    )

    def __init__(
        self,
        tokens: Sequence[int],
        *,
        finish: FinishReason,
        stop_token_id: int = 0,
        prompt_tokens: int = 0,
        tokens_per_frame: int = 1,
        fault: Fault | None = None,
        fault_after: int = 0,
        logprobs: bool = False,
        top_logprobs: int = 0,
        rng_seed: int = 0,
        alternatives: Sequence[int] = (),
        pause: tuple[int, float] | None = None,
        start: int = 0,
    ) -> None:
        """``start``: tokens of the reply another replica already gave (forced tokens):
        the stream goes on after them, as an unbroken run's would (logprobs included);
        a fault comes after ``fault_after`` tokens of its own (each replica a request
        moves to meets it again, if the reply has not ended by then)."""
        if finish == FinishReason.NONE or finish == FinishReason.CANCELLED:
            raise ValueError("finish must be STOP or LENGTH")
        if tokens_per_frame < 1:
            raise ValueError("tokens_per_frame must be at least 1")
        self._tokens = list(tokens)
        self._finish = finish
        self._stop_token_id = stop_token_id
        self.prompt_tokens = prompt_tokens
        self._tpf = tokens_per_frame
        start = min(start, len(self._tokens))
        # A continued request meets its fault only before the reply's end.
        self._fault = fault if not start or start + fault_after < len(self._tokens) else None
        self._fault_at = min(start + fault_after, len(self._tokens))
        self._logprobs = logprobs
        self._k = top_logprobs
        self._rng = random.Random(rng_seed)
        self._pool = tuple(alternatives)
        self._pos = start
        if logprobs:  # the draws the skipped tokens took in an unbroken run
            for chosen in self._tokens[:start]:
                self._token_logprobs(chosen, self._k)
        self._stalled = False
        self._created_ns = time.monotonic_ns()
        self._first_ns: int | None = None
        # (position, seconds): a stall before that token (not one passed already)
        self._pause = pause if pause is None or pause[0] >= start else None
        self.done = False

    def pause_due(self) -> float:
        """Seconds to wait before the next frame (a scripted stall, once), else 0."""
        pause = self._pause
        if pause is None or self._pos < pause[0]:
            return 0.0
        self._pause = None
        return pause[1]

    @property
    def emitted(self) -> int:
        """Tokens handed out so far."""
        return self._pos

    @property
    def stalled(self) -> bool:
        return self._stalled

    def next(self) -> TextResult | Fault:
        """The next frame's worth of tokens, the final result, or an injected fault."""
        if self.done:
            raise RuntimeError("generation already finished")
        if self._stalled:
            raise RuntimeError("generation is stalled; only cancel() is allowed")
        now = time.monotonic_ns()
        if self._first_ns is None:
            self._first_ns = now
        fault = self._fault
        if fault is not None and self._pos >= self._fault_at:
            if fault.kind == "stall":
                self._stalled = True
            else:
                self.done = True
            return fault
        end = min(self._pos + self._tpf, len(self._tokens))
        if fault is not None:
            end = min(end, self._fault_at)
        chunk = self._tokens[self._pos : end]
        self._pos = end
        result = TextResult(chunk)
        if self._logprobs:
            self._fill_logprobs(result)
        if fault is None and end == len(self._tokens):
            result.finish_reason = self._finish
            if self._finish == FinishReason.STOP:
                result.stop_token_id = self._stop_token_id
            self._finalize(result, now)
        return result

    def cancel(self) -> TextResult:
        """End the stream early: the final result with finish reason CANCELLED."""
        if self.done:
            raise RuntimeError("generation already finished")
        now = time.monotonic_ns()
        if self._first_ns is None:
            self._first_ns = now
        result = TextResult([], FinishReason.CANCELLED)
        self._finalize(result, now)
        return result

    def _finalize(self, result: TextResult, now: int) -> None:
        self.done = True
        first = self._first_ns if self._first_ns is not None else now
        result.prompt_tokens = self.prompt_tokens
        result.cached_tokens = 0
        result.completion_tokens = self._pos
        result.queue_ns = 0  # the mock rejects instead of queueing
        result.prefill_ns = max(1, first - self._created_ns)
        result.decode_ns = max(1, now - first)

    def _fill_logprobs(self, result: TextResult) -> None:
        k = self._k
        lps: list[float] = []
        top_ids: list[int] = []
        top_lps: list[float] = []
        for chosen in result.tokens:
            lp, ids, alts = self._token_logprobs(chosen, k)
            lps.append(lp)
            top_ids.extend(ids)
            top_lps.extend(alts)
        result.logprobs = _f32(lps)
        if k:
            result.top_logprobs = k
            result.top_token_ids = top_ids
            result.top_token_logprobs = _f32(top_lps)

    def _token_logprobs(self, chosen: int, k: int) -> tuple[float, list[int], list[float]]:
        rng = self._rng
        m = max(k, 1)
        top = 0.35 + 0.6 * rng.random()
        rest = (1.0 - top) * (0.5 + 0.45 * rng.random())
        weights = [0.05 + rng.random() for _ in range(m - 1)]
        total = sum(weights) or 1.0
        probs = sorted([top] + [rest * w / total for w in weights], reverse=True)
        logps = [math.log(p) for p in probs]
        rank = 0 if m == 1 or rng.random() < 0.75 else rng.randrange(m)
        if k == 0:
            return logps[rank], [], []
        others = self._alternatives(chosen, m - 1, rng)
        ids = [*others[:rank], chosen, *others[rank:]]
        return logps[rank], ids, logps

    def _alternatives(self, chosen: int, count: int, rng: random.Random) -> list[int]:
        out: list[int] = []
        seen = {chosen}
        pool = self._pool
        if pool:
            start = rng.randrange(len(pool))
            for i in range(len(pool)):
                if len(out) == count:
                    break
                cand = pool[(start + i) % len(pool)]
                if cand not in seen:
                    seen.add(cand)
                    out.append(cand)
        cand = 0
        while len(out) < count:
            if cand not in seen:
                seen.add(cand)
                out.append(cand)
            cand += 1
        return out


class MockEngine:
    """Validates queries and starts deterministic generations for a fixed set of models."""

    def __init__(
        self,
        models: Sequence[MockModel],
        *,
        capacity: int = 256,
        script: Script | None = None,
        reply_tokens: int | None = None,
        tokens_per_frame: int = 1,
        tokenizers: Mapping[str, Tokenizer] | None = None,
    ) -> None:
        """``tokenizers`` maps tokenizer names to ready objects; the rest are loaded by name."""
        if not models:
            raise ValueError("at least one model is required")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        if tokens_per_frame < 1:
            raise ValueError("tokens_per_frame must be at least 1")
        if reply_tokens is not None and reply_tokens < 0:
            raise ValueError("reply_tokens must be non-negative")
        self._models: dict[str, MockModel] = {}
        for m in models:
            if m.name in self._models:
                raise ValueError(f"duplicate model name {m.name!r}")
            if m.context_length < 1:
                raise ValueError(f"model {m.name!r}: context_length must be positive")
            self._models[m.name] = m
        self.capacity = capacity
        self.script = script
        self.reply_tokens = reply_tokens
        self.tokens_per_frame = tokens_per_frame
        self._tokenizers: dict[str, Tokenizer] = dict(tokenizers or {})
        for m in models:
            if m.tokenizer not in self._tokenizers:
                self._tokenizers[m.tokenizer] = load_tokenizer(m.tokenizer)
        self._pools: dict[str, tuple[int, ...]] = {}
        self.memory: MockMemory | None = None  # models loaded on demand (--memory-budget)

    @property
    def models(self) -> list[MockModel]:
        return list(self._models.values())

    def model(self, name: str) -> MockModel | None:
        return self._models.get(name)

    def answer(self, query: ModalQuery) -> list[Message] | EngineError:
        """Every frame answering a modality query (see ``modalities``), or an error."""
        from mocks.mock_ie.modalities import modal_answer  # it imports this module

        return modal_answer(self, query)

    def scripted_reply(self, model: MockModel, prompt: str) -> str | None:
        """The script's reply for ``prompt`` (matched as text generation matches it)."""
        if self.script is None:
            return None
        rule = self.script.match(prompt)
        return rule.reply if rule is not None else None

    def tokenizer(self, model: str) -> Tokenizer:
        """The tokenizer of a served model."""
        return self._tokenizers[self._models[model].tokenizer]

    def hello_ack(self) -> HelloAck:
        return HelloAck(
            engine=ENGINE_NAME,
            protocol_version=PROTOCOL_VERSION,
            models=self.model_infos(),
            capacity=self.capacity,
            memory_budget=self.memory.budget if self.memory is not None else 0,
            continues=True,
            continues_guided=True,
        )

    def model_infos(self) -> list[ModelInfo]:
        """Its models as the protocol lists them (with their states when they load on demand)."""
        mem = self.memory
        return [
            ModelInfo(
                m.name,
                m.context_length,
                0,
                m.capabilities,
                m.embedding_dimensions,
                mem.state(m.name) if mem is not None else ModelState.LOADED,
                mem.model_bytes if mem is not None else 0,
                m.audio_sample_rate,
            )
            for m in self._models.values()
        ]

    def start(self, query: TextQuery) -> MockGeneration | EngineError:
        """Validate ``query`` and return its generation, or the error a real engine would send."""
        if self.memory is not None:
            refused = self.memory.refuse(query.model)
            if refused is not None:
                return refused
        model = self._models.get(query.model)
        if model is None:
            served = ", ".join(self._models)
            return EngineError(
                ErrorCode.UNKNOWN_MODEL, f"unknown model {query.model!r}; serving: {served}"
            )
        if Capability.GENERATE not in model.capabilities:
            return EngineError(
                ErrorCode.UNSUPPORTED, f"model {model.name!r} does not generate text"
            )
        if query.images and Capability.VISION not in model.capabilities:
            return EngineError(ErrorCode.UNSUPPORTED, f"model {model.name!r} takes no images")
        s = query.sampling
        if s.max_tokens <= 0:
            return EngineError(ErrorCode.INVALID_REQUEST, "max_tokens must be at least 1")
        if not 0 <= s.top_logprobs <= MAX_TOP_LOGPROBS:
            return EngineError(
                ErrorCode.INVALID_REQUEST, f"top_logprobs must be in 0..{MAX_TOP_LOGPROBS}"
            )
        prompt = query.prompt_tokens
        if any(not 0 <= t <= _MAX_ID for t in prompt):
            return EngineError(ErrorCode.INVALID_REQUEST, "prompt token id out of range")
        if len(prompt) + s.max_tokens > model.context_length:
            return EngineError(
                ErrorCode.CONTEXT_LENGTH,
                f"prompt ({len(prompt)} tokens) + max_tokens ({s.max_tokens}) exceeds the "
                f"context length {model.context_length} of model {model.name!r}",
            )
        refused = _guided_refusal(query.guided)
        if refused is not None:
            return refused
        if len(query.forced_tokens) >= s.max_tokens:
            return EngineError(ErrorCode.INVALID_REQUEST, "forced tokens reach max_tokens")
        tok = self._tokenizers[model.tokenizer]
        key = _request_key(prompt, s.seed)
        rule: Rule | None = None
        if self.script is not None:
            rule = self.script.match(tok.decode(prompt))
        natural = self._natural_reply(tok, key, query, rule)

        stops = set(s.stop_token_ids)
        stop_at: int | None = None
        if stops:
            for i in range(s.min_tokens, min(len(natural), s.max_tokens)):
                if natural[i] in stops:
                    stop_at = i
                    break
        end_token: int | None = None
        if stop_at is not None:
            body = natural[:stop_at]
            end_token = natural[stop_at]
            finish = FinishReason.STOP
        elif len(natural) >= s.max_tokens:
            body = natural[: s.max_tokens]
            finish = FinishReason.LENGTH
        elif rule is not None and rule.finish == "length":
            body = natural
            finish = FinishReason.LENGTH
        else:
            body = natural
            finish = FinishReason.STOP
            if s.stop_token_ids:
                end_token = s.stop_token_ids[0]
        tokens = body if end_token is None else [*body, end_token]

        fault: Fault | None = None
        fault_after = 0
        if rule is not None and rule.fault is not None:
            fault = Fault(rule.fault, rule.error_code, rule.error_message)
            fault_after = rule.fault_after
        return MockGeneration(
            tokens,
            finish=finish,
            stop_token_id=end_token or 0,
            prompt_tokens=len(prompt),
            tokens_per_frame=self.tokens_per_frame,
            fault=fault,
            fault_after=fault_after,
            logprobs=s.logprobs,
            top_logprobs=s.top_logprobs if s.logprobs else 0,
            rng_seed=int.from_bytes(key[16:32], "little"),
            alternatives=self._pool(model.tokenizer) if s.logprobs and s.top_logprobs else (),
            pause=(rule.pause_after, rule.pause_ms / 1e3) if rule and rule.pause_ms else None,
            start=len(query.forced_tokens),
        )

    def _natural_reply(
        self, tok: Tokenizer, key: bytes, query: TextQuery, rule: Rule | None
    ) -> list[int]:
        """The reply the model 'wants' to give, before max_tokens and stop ids apply.

        Guided decoding wins over a scripted reply, as a grammar would over a model's wish
        (a scripted reply that is one of a guided choice's options is allowed by it).
        """
        guided = query.guided
        if rule is not None and rule.unguided:
            guided = None  # an engine that ignores the requested format
        if (
            guided is not None
            and guided.mode is GuidedMode.CHOICE
            and rule is not None
            and rule.reply in guided.choices
        ):
            return tok.encode(rule.reply)  # a scripted reply the constraint allows
        if guided is not None and guided.mode is not GuidedMode.NONE:  # "constrained decoding"
            offset = int.from_bytes(key[0:8], "little") % len(corpus.WORDS)
            words = [w.strip(".,;:!?") for w in corpus.passage(offset, 6).split()]
            if guided.mode is GuidedMode.CHOICE:
                return tok.encode(guided.choices[offset % len(guided.choices)])
            if guided.mode is GuidedMode.REGEX:
                return tok.encode(regex_instance(guided.pattern))
            schema = json.loads(guided.json_schema) if guided.json_schema else {}
            value = (
                instance(schema, words)
                if guided.mode is GuidedMode.JSON_SCHEMA
                else {"answer": " ".join(words[:4])}
            )
            return tok.encode(json.dumps(value, ensure_ascii=False))
        if rule is not None and rule.reply_tokens is not None:
            return list(rule.reply_tokens)
        if rule is not None and rule.reply is not None:
            return tok.encode(rule.reply)
        s = query.sampling
        if query.images:  # say what arrived, so tests can prove the image path
            sizes = ", ".join(f"{i.width}x{i.height} {i.mime_type}" for i in query.images)
            return tok.encode(f"I see {len(query.images)} image(s): {sizes}.")
        if self.reply_tokens is not None:
            n = self.reply_tokens
        else:
            span = MAX_REPLY_TOKENS - MIN_REPLY_TOKENS + 1
            n = MIN_REPLY_TOKENS + int.from_bytes(key[8:12], "little") % span
        if s.ignore_eos:
            n = s.max_tokens
        n = max(n, s.min_tokens)
        offset = int.from_bytes(key[0:8], "little") % len(corpus.WORDS)
        return _corpus_tokens(tok, offset, n)

    def _pool(self, tokenizer: str) -> tuple[int, ...]:
        """Valid ids of a tokenizer to draw top-logprob alternatives from."""
        pool = self._pools.get(tokenizer)
        if pool is None:
            pool = tuple(sorted(set(self._tokenizers[tokenizer].encode(corpus.TEXT))))
            self._pools[tokenizer] = pool
        return pool


def _corpus_tokens(tok: Tokenizer, offset: int, n: int) -> list[int]:
    """Exactly ``n`` token ids of corpus text starting at word ``offset``."""
    if n <= 0:
        return []
    words = n + 8
    while True:
        ids = tok.encode(corpus.passage(offset, words))
        if len(ids) >= n:
            return ids[:n]
        if words > 64 * (n + 8):
            raise RuntimeError("tokenizer produced too few tokens for the corpus")
        words *= 2
