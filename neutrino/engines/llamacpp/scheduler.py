"""Continuous batching over llama.cpp: the decode thread's loop.

One thread owns the llama.cpp context. The asyncio side puts commands (start, cancel,
stop) in :attr:`Scheduler.inbox` and gets each step's frames back through ``emit``
(called from this thread; the handler hands them to the event loop).

A step is one ``llama_decode`` call: the next token of every generating sequence, and up
to ``chunk`` prompt tokens of sequences still prefilling (oldest first), so a new
arrival or a cancel waits at most one chunk. Each slot is a llama.cpp sequence with its
own KV cells; a finished sequence's cells stay, and a new prompt goes to the free slot
sharing its longest prefix and prefills only the rest (``cachedTokens``). A cancel frees
the slot's cells at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Message,
    TextQuery,
    TextResult,
)
from neutrino.engines.llamacpp import guided
from neutrino.engines.llamacpp.backend import Backend, BackendError, Sampler, mask, token_logprobs

log = logging.getLogger("neutrino.engines.llamacpp")

Frames = list[tuple[int, Message]]  # (request key, frame)
_STATS_EVERY_S = 0.1
_USEFUL_PREFIX = 10  # a slot's cells are reused for a prefix of at least 1/10 of a prompt


@dataclass(slots=True, eq=False)  # compared and hashed by identity
class Seq:
    """One request: its prompt, sampler and place in a slot."""

    key: int
    query: TextQuery
    arrived_ns: int
    sampler: Sampler | None = None
    slot: Slot | None = None
    n_past: int = 0  # prompt and generated tokens in the slot's KV cells
    cached: int = 0
    pending: int = -1  # the sampled token to feed next (-1: still prefilling)
    generated: int = 0
    # The answer so far given by another replica (a moved request): the last ``forced``
    # ids of the query's prompt here, counted as generated (schemas/ie.capnp).
    forced: int = 0
    stops: frozenset[int] = frozenset()
    admitted_ns: int = 0
    first_ns: int = 0


@dataclass(slots=True)
class Slot:
    """A llama.cpp sequence: what its KV cells hold, and who uses it."""

    index: int
    tokens: list[int] = field(default_factory=list)
    seq: Seq | None = None
    used: int = 0  # when it was last given out (the least recently used goes first)


@dataclass(slots=True)
class Stats:
    queries: int = 0
    finished: int = 0
    cancels: int = 0
    errors: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    max_batch: int = 0  # most sequences given a token in one step
    batched_steps: int = 0  # steps that decoded more than one sequence's next token


class Scheduler:
    """The decode loop; :meth:`run` is the decode thread's body."""

    def __init__(
        self,
        backend: Backend,
        emit: Callable[[Frames], None],
        stats_path: str | None = None,
    ) -> None:
        self.backend = backend
        self.emit = emit
        self.inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.slots = [Slot(i) for i in range(backend.cfg.slots)]
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []  # in admission order
        self.stats = Stats()
        self._stats_path = stats_path
        self._stats_at = 0.0
        self._uses = 0
        self._stopping = False

    # ------------------------------------------------------------------ from the loop

    def start(self, key: int, query: TextQuery) -> None:
        forced = len(query.forced_tokens)
        if forced:  # prefilled after the prompt, as if this engine had generated them
            context = [*query.prompt_tokens, *query.forced_tokens]
            query = dataclasses.replace(query, prompt_tokens=context, forced_tokens=())
        seq = Seq(key, query, time.monotonic_ns(), generated=forced, forced=forced)
        self.inbox.put(("start", seq))

    def cancel(self, key: int) -> None:
        self.inbox.put(("cancel", key))

    def stop(self) -> None:
        self.inbox.put(("stop", None))

    # ------------------------------------------------------------------ the thread

    def run(self) -> None:
        try:
            while not self._stopping:
                if not self.running and not self.waiting:
                    self._write_stats(force=True)
                    self._command(*self.inbox.get())
                self._drain()
                if self._stopping:
                    break
                out: Frames = []
                self._admit(out)
                if self.running:
                    try:
                        self._step(out)
                    except Exception:  # the step's requests fail; the engine goes on
                        log.exception("a decode step failed")
                        self._fail_running(out, "the decode step failed")
                if out:
                    self.emit(out)
                self._write_stats()
        except BaseException:
            out = []
            self._fail_running(out, "the engine's decode loop stopped")
            self.emit(out)
            raise
        finally:
            for seq in list(self.running):
                self._release(seq, keep=False)
            self.backend.close()

    def _drain(self) -> None:
        while True:
            try:
                cmd = self.inbox.get_nowait()
            except queue.Empty:
                return
            self._command(*cmd)

    def _command(self, kind: str, arg: Any) -> None:
        if kind == "start":
            self.stats.queries += 1
            self.waiting.append(arg)
        elif kind == "cancel":
            self._cancel(arg)
        else:
            self._stopping = True

    def _cancel(self, key: int) -> None:
        for seq in self.waiting:
            if seq.key == key:
                self.waiting.remove(seq)
                self.stats.cancels += 1
                return
        for seq in self.running:
            if seq.key == key:
                self.stats.cancels += 1
                self._release(seq, keep=False)
                self._write_stats(force=True)
                return

    # ------------------------------------------------------------------ admission

    def _admit(self, out: Frames) -> None:
        while self.waiting:
            free = [s for s in self.slots if s.seq is None]
            if not free:
                return
            seq = self.waiting.popleft()
            err = self._prepare(seq)
            if err is not None:
                self.stats.errors += 1
                out.append((seq.key, err))
                continue
            self._place(seq, free)

    def _prepare(self, seq: Seq) -> EngineError | None:
        """The request's sampler (its grammar converted and parsed here)."""
        q = seq.query
        try:
            seq.sampler = self.backend.sampler(q.sampling, guided.grammar(q.guided))
        except guided.Unsupported as exc:
            return EngineError(ErrorCode.UNSUPPORTED, str(exc))
        except (guided.Invalid, BackendError) as exc:
            return EngineError(ErrorCode.INVALID_REQUEST, str(exc))
        except Exception as exc:  # a converter's bug: this request fails, not the engine
            log.exception("query %d: cannot build its sampler", seq.key)
            return EngineError(ErrorCode.INTERNAL, f"cannot build the sampler: {exc}")
        vocab = self.backend.n_vocab
        stops = {t for t in q.sampling.stop_token_ids if 0 <= t < vocab}
        if q.guided is not None:  # a finished grammar allows end-of-generation tokens only
            stops |= self.backend.eog
        seq.stops = frozenset(stops)
        prompt = q.prompt_tokens
        if seq.forced:
            seq.sampler.saw(prompt[: -seq.forced])
            try:  # the grammar and the penalties advanced over the answer so far
                seq.sampler.forced(prompt[-seq.forced :])
            except BackendError as exc:
                return EngineError(ErrorCode.INVALID_REQUEST, str(exc))
        else:
            seq.sampler.saw(prompt)
        return None

    def _place(self, seq: Seq, free: list[Slot]) -> None:
        """Put ``seq`` in the free slot sharing the longest prefix with its prompt, if that
        is a useful part of it (a tenth); else in the least recently used free slot, so
        that a stray shared token does not evict another prompt's cells."""
        prompt = seq.query.prompt_tokens
        lru = sorted(free, key=lambda s: s.used)
        best, common = lru[0], 0
        for slot in lru:
            n = _common_prefix(slot.tokens, prompt)
            if n > common:
                best, common = slot, n
        if common * _USEFUL_PREFIX < len(prompt):
            best = lru[0]
            common = _common_prefix(best.tokens, prompt)
        common = min(common, len(prompt) - 1)  # the last prompt token gives the logits
        try:
            self.backend.forget(best.index, common)
        except BackendError:
            common = 0
        del best.tokens[common:]
        self._uses += 1
        best.seq, best.used = seq, self._uses
        seq.slot, seq.n_past, seq.cached = best, common, common
        seq.admitted_ns = time.monotonic_ns()
        self.stats.prompt_tokens += len(prompt)
        self.stats.cached_tokens += common
        self.running.append(seq)

    # ------------------------------------------------------------------ one step

    def _step(self, out: Frames) -> None:
        """One ``llama_decode``: a generating sequence's next token, a prefilling one's
        share, each sequence's in the order of their slots (llama.cpp ran batches whose
        sequences' KV streams came out of order about a fifth slower, measured here)."""
        entries: list[tuple[int, int, int, bool]] = []
        outputs: list[tuple[Seq, int]] = []  # a sequence and its batch index
        fed: list[tuple[Seq, list[int]]] = []
        shares = dict(self._prefill_shares())
        decoding = 0
        for seq in sorted(self.running, key=_slot_index):
            slot = _slot_index(seq)
            if seq.pending >= 0:
                outputs.append((seq, len(entries)))
                entries.append((seq.pending, seq.n_past, slot, True))
                fed.append((seq, [seq.pending]))
                decoding += 1
                continue
            take = shares.get(seq, 0)
            if not take:
                continue
            prompt = seq.query.prompt_tokens
            end = seq.n_past + take
            for pos in range(seq.n_past, end):
                entries.append((prompt[pos], pos, slot, pos == len(prompt) - 1))
            if end == len(prompt):
                outputs.append((seq, len(entries) - 1))
            fed.append((seq, prompt[seq.n_past : end]))
        rc = self.backend.decode(entries)
        self.stats.steps += 1
        self.stats.max_batch = max(self.stats.max_batch, decoding)
        if decoding > 1:
            self.stats.batched_steps += 1
        if rc != 0:
            self._failed_step(rc, [s for s, _ in fed], out)
            return
        for seq, tokens in fed:
            seq.n_past += len(tokens)
            seq.slot.tokens += tokens  # type: ignore[union-attr]
        for seq, index in outputs:
            self._sample(seq, index, out)

    def _fail_running(self, out: Frames, why: str) -> None:
        for seq in [*self.running, *self.waiting]:
            self.stats.errors += 1
            out.append((seq.key, EngineError(ErrorCode.INTERNAL, why)))
            with contextlib.suppress(Exception):
                self._release(seq, keep=False)
        self.waiting.clear()

    def _prefill_shares(self) -> list[tuple[Seq, int]]:
        """This step's prompt tokens per prefilling sequence: ``chunk`` shared equally,
        what a short prompt leaves going to the longer ones. A newcomer gets its share at
        the next step, whatever long prompt is being prefilled."""
        pending = sorted(
            (s for s in self.running if s.pending < 0),
            key=lambda s: len(s.query.prompt_tokens) - s.n_past,
        )
        budget, shares = self.backend.cfg.chunk, []
        for i, seq in enumerate(pending):
            rest = len(seq.query.prompt_tokens) - seq.n_past
            take = min(rest, max(1, budget // (len(pending) - i)))
            if take <= 0 or budget <= 0:
                break
            shares.append((seq, take))
            budget -= take
        return shares

    def _failed_step(self, rc: int, seqs: list[Seq], out: Frames) -> None:
        log.error("llama_decode failed (%d) for %d sequences", rc, len(seqs))
        for seq in seqs:
            self.stats.errors += 1
            out.append((seq.key, EngineError(ErrorCode.INTERNAL, f"llama_decode failed ({rc})")))
            self._release(seq, keep=False)

    def _sample(self, seq: Seq, index: int, out: Frames) -> None:
        s = seq.query.sampling
        logits = self.backend.logits(index)
        lp = None
        if s.logprobs:
            lp, top_ids, top_lps = token_logprobs(logits, s.top_logprobs)
        if seq.generated < s.min_tokens:
            mask(logits, sorted(seq.stops))
        token = self.backend.sample(seq.sampler, index)  # type: ignore[arg-type]
        now = time.monotonic_ns()
        if seq.generated == seq.forced:
            seq.first_ns = now
        seq.generated += 1
        result = TextResult([token])
        if lp is not None:
            result.logprobs = [float(lp[token])]
            if s.top_logprobs:
                result.top_logprobs = s.top_logprobs
                result.top_token_ids = top_ids
                result.top_token_logprobs = top_lps
        finish = self._finish(seq, token)
        if finish is not FinishReason.NONE:
            result.finish_reason = finish
            if finish is FinishReason.STOP:
                result.stop_token_id = token
            self._final(seq, result, now)
        else:
            seq.pending = token
        out.append((seq.key, result))

    def _finish(self, seq: Seq, token: int) -> FinishReason:
        if token in seq.stops:
            return FinishReason.STOP
        if seq.generated >= seq.query.sampling.max_tokens:
            return FinishReason.LENGTH
        if seq.n_past >= self.backend.n_ctx_seq:  # no room to feed this token
            return FinishReason.LENGTH
        return FinishReason.NONE

    def _final(self, seq: Seq, result: TextResult, now: int) -> None:
        result.prompt_tokens = len(seq.query.prompt_tokens) - seq.forced
        result.cached_tokens = seq.cached
        result.completion_tokens = seq.generated
        result.queue_ns = max(1, seq.admitted_ns - seq.arrived_ns)
        result.prefill_ns = max(1, seq.first_ns - seq.admitted_ns)
        result.decode_ns = max(1, now - seq.first_ns)
        self.stats.finished += 1
        self.stats.generated_tokens += seq.generated - seq.forced
        self._release(seq, keep=True)
        self._write_stats(force=True)

    def _release(self, seq: Seq, *, keep: bool) -> None:
        """Take ``seq`` out of its slot; its KV cells stay for prefix reuse when ``keep``."""
        if seq in self.running:
            self.running.remove(seq)
        slot = seq.slot
        if slot is not None:
            if not keep:
                try:
                    self.backend.forget(slot.index, 0)
                finally:
                    slot.tokens.clear()
            slot.seq = None
            seq.slot = None
        if seq.sampler is not None:
            seq.sampler.free()
            seq.sampler = None

    # ------------------------------------------------------------------ stats

    def snapshot(self) -> dict[str, object]:
        return {
            **asdict(self.stats),
            "running": len(self.running),
            "waiting": len(self.waiting),
            "slots": [{"busy": s.seq is not None, "kv_tokens": len(s.tokens)} for s in self.slots],
        }

    def _write_stats(self, force: bool = False) -> None:
        """The counters as JSON in ``--stats FILE`` (replaced whole; at most every 0.1 s
        while decoding, and at each request's end)."""
        path = self._stats_path
        if path is None:
            return
        now = time.monotonic()
        if not force and now - self._stats_at < _STATS_EVERY_S:
            return
        self._stats_at = now
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.snapshot(), f)
        os.replace(tmp, path)


def _slot_index(seq: Seq) -> int:
    assert seq.slot is not None
    return seq.slot.index


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
