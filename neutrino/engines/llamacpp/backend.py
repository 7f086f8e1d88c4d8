"""The llama.cpp calls this engine makes, through llama-cpp-python's low-level bindings.

One :class:`Backend` holds a model, one context with a sequence per slot (each with its
own part of the KV cache: ``kv_unified`` off, so a sequence's room is the context per
sequence), and one batch. Only the decode thread calls it after construction.
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp as lc
import numpy as np

from neutrino.engine.messages import Sampling

log = logging.getLogger("neutrino.engines.llamacpp")

_NEG_INF = float("-inf")
_ggml_log = logging.getLogger("neutrino.engines.llamacpp.ggml")
# ggml's levels: 1 debug, 2 info, 3 warning, 4 error, 5 the previous line's continued.
_GGML_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.WARNING, 4: logging.ERROR}
_ggml_last = [logging.DEBUG]


@lc.llama_log_callback  # type: ignore[untyped-decorator]
def _on_ggml_log(level: int, text: bytes, _user: object) -> None:
    """llama.cpp's log lines: warnings and errors logged, the rest (model loading) at debug."""
    lvl = _ggml_last[0] if level == 5 else _GGML_LEVELS.get(level, logging.DEBUG)
    _ggml_last[0] = lvl
    if _ggml_log.isEnabledFor(lvl):
        line = text.decode("utf-8", "replace").rstrip()
        if line:
            _ggml_log.log(lvl, "%s", line)


lc.llama_log_set(_on_ggml_log, ctypes.c_void_p(0))


class BackendError(RuntimeError):
    """llama.cpp refused: a model that does not load, a grammar it cannot parse."""


@dataclass(frozen=True, slots=True)
class BackendConfig:
    gguf: str
    slots: int = 4
    threads: int = 1
    ctx: int = 2048  # tokens per sequence (the context a client's request has)
    chunk: int = 256  # prompt tokens prefilled per step, over every sequence
    gpu_layers: int = 0


class Backend:
    """A GGUF model, its context (``slots`` sequences of ``ctx`` tokens) and a batch."""

    def __init__(self, cfg: BackendConfig) -> None:
        self.cfg = cfg
        lc.llama_backend_init()
        mp = lc.llama_model_default_params()
        mp.n_gpu_layers = cfg.gpu_layers
        model = lc.llama_model_load_from_file(cfg.gguf.encode(), mp)
        if not model:
            raise BackendError(f"llama.cpp could not load {cfg.gguf!r}")
        self._model = model
        trained = int(lc.llama_model_n_ctx_train(model))
        per_seq = min(cfg.ctx, trained) if trained > 0 else cfg.ctx
        self.batch_size = cfg.chunk + cfg.slots
        cp = lc.llama_context_default_params()
        cp.n_ctx = per_seq * cfg.slots
        cp.n_batch = self.batch_size
        cp.n_ubatch = self.batch_size
        cp.n_seq_max = cfg.slots
        cp.n_threads = cfg.threads
        cp.n_threads_batch = cfg.threads
        cp.kv_unified = False
        cp.no_perf = True
        ctx = lc.llama_init_from_model(model, cp)
        if not ctx:
            lc.llama_model_free(model)
            raise BackendError("llama.cpp could not create a context")
        self._ctx = ctx
        self.n_ctx_seq = int(lc.llama_n_ctx_seq(ctx))
        self._vocab = lc.llama_model_get_vocab(model)
        self.n_vocab = int(lc.llama_vocab_n_tokens(self._vocab))
        vocab = self._vocab
        self.eog = frozenset(t for t in range(self.n_vocab) if lc.llama_vocab_is_eog(vocab, t))
        self._mem = lc.llama_get_memory(ctx)
        self._batch = lc.llama_batch_init(self.batch_size, 0, 1)
        self.description = _describe(model)

    # ------------------------------------------------------------------ decoding

    def decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> int:
        """Decode ``(token, position, sequence, wants_logits)`` entries in one call; 0 on
        success (llama.cpp's status otherwise). Output ``i`` is the i-th entry with logits."""
        b = self._batch
        token, pos, n_seq, seq, logits = b.token, b.pos, b.n_seq_id, b.seq_id, b.logits
        for i, (t, p, s, want) in enumerate(entries):
            token[i] = t
            pos[i] = p
            n_seq[i] = 1
            seq[i][0] = s
            logits[i] = want
        b.n_tokens = len(entries)
        return int(lc.llama_decode(self._ctx, b))

    def logits(self, index: int) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The logits of batch entry ``index`` (a view of llama.cpp's buffer: writes to it
        are what the sampler sees)."""
        ptr = lc.llama_get_logits_ith(self._ctx, index)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def forget(self, seq: int, keep: int) -> None:
        """Drop sequence ``seq``'s KV cells from position ``keep`` on (0: all of them)."""
        if not lc.llama_memory_seq_rm(self._mem, seq, keep, -1):
            lc.llama_memory_seq_rm(self._mem, seq, -1, -1)
            raise BackendError("partial removal refused")

    # ------------------------------------------------------------------ sampling

    def sampler(self, s: Sampling, grammar: str | None) -> Sampler:
        """A sampler chain for one request: penalties, grammar, then vLLM's order of
        temperature, top-k, top-p and min-p, and a seeded draw (greedy at temperature 0)."""
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        sampler = Sampler(chain)
        add = lc.llama_sampler_chain_add
        window = self.n_ctx_seq  # penalties look at the whole sequence (llama.cpp: 0 is off)
        if s.repetition_penalty != 1.0:  # sees the prompt's tokens too (as vLLM's does)
            sampler.repetition = int(lc.llama_sampler_chain_n(chain))
            add(
                chain,
                lc.llama_sampler_init_penalties(self.n_vocab, window, s.repetition_penalty, 0, 0),
            )
        if s.presence_penalty or s.frequency_penalty:  # the generated tokens only
            add(
                chain,
                lc.llama_sampler_init_penalties(
                    self.n_vocab, window, 1.0, s.frequency_penalty, s.presence_penalty
                ),
            )
        if grammar is not None:
            g = lc.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
            if not g:
                sampler.free()
                raise BackendError("llama.cpp could not parse the grammar")
            sampler.grammar = int(lc.llama_sampler_chain_n(chain))
            add(chain, g)
        if s.temperature <= 0.0:
            add(chain, lc.llama_sampler_init_greedy())
            return sampler
        add(chain, lc.llama_sampler_init_temp(s.temperature))
        if s.top_k > 0:
            add(chain, lc.llama_sampler_init_top_k(s.top_k))
        if s.top_p < 1.0:
            add(chain, lc.llama_sampler_init_top_p(s.top_p, 1))
        if s.min_p > 0.0:
            add(chain, lc.llama_sampler_init_min_p(s.min_p, 1))
        seed = lc.LLAMA_DEFAULT_SEED if s.seed is None else s.seed & 0xFFFFFFFF
        add(chain, lc.llama_sampler_init_dist(seed))
        return sampler

    def sample(self, sampler: Sampler, index: int) -> int:
        """Draw (and accept) a token from batch output ``index``."""
        return int(lc.llama_sampler_sample(sampler.chain, self._ctx, index))

    def close(self) -> None:
        if self._ctx:
            lc.llama_batch_free(self._batch)
            lc.llama_free(self._ctx)
            lc.llama_model_free(self._model)
            self._ctx = None


class Sampler:
    """One request's llama.cpp sampler chain (freed with :meth:`free`)."""

    __slots__ = ("chain", "grammar", "repetition")

    def __init__(self, chain: object) -> None:
        self.chain = chain
        self.repetition = -1  # index in the chain of the repetition penalty, if any
        self.grammar = -1  # and of the grammar

    def saw(self, tokens: Sequence[int]) -> None:
        """Tell the repetition penalty about the prompt's tokens (vLLM counts them)."""
        if self.repetition >= 0:
            sub = lc.llama_sampler_chain_get(self.chain, self.repetition)
            for t in tokens:
                lc.llama_sampler_accept(sub, t)

    def forced(self, tokens: Sequence[int]) -> None:
        """Accept ``tokens`` as if sampled (the answer so far of a moved request): the
        grammar advances over them, the penalties count them. A token the grammar does
        not allow there raises BackendError (llama.cpp's grammar would abort on it)."""
        grammar = None
        if self.grammar >= 0:
            grammar = lc.llama_sampler_chain_get(self.chain, self.grammar)
        for i, t in enumerate(tokens):
            if grammar is not None:
                one = lc.llama_token_data(t, 0.0, 0.0)
                cand = lc.llama_token_data_array(ctypes.pointer(one), 1, -1, False)
                lc.llama_sampler_apply(grammar, ctypes.byref(cand))
                if one.logit == -math.inf:
                    raise BackendError(f"forced token {i} (id {t}) breaks the guided constraint")
            lc.llama_sampler_accept(self.chain, t)

    def free(self) -> None:
        if self.chain:
            lc.llama_sampler_free(self.chain)
            self.chain = None


def token_logprobs(
    logits: np.ndarray[Any, np.dtype[np.float32]], k: int
) -> tuple[np.ndarray[Any, np.dtype[np.float64]], list[int], list[float]]:
    """The model's log-probabilities (a log-softmax of the raw logits, as vLLM reports
    them) and the ``k`` most likely ids with theirs, best first."""
    x = logits.astype(np.float64)
    top = float(x.max())
    lse = top + math.log(float(np.exp(x - top).sum()))
    lp = x - lse
    if k <= 0:
        return lp, [], []
    idx = np.argpartition(-lp, k - 1)[:k]
    idx = idx[np.argsort(-lp[idx], kind="stable")]
    return lp, [int(i) for i in idx], [float(lp[i]) for i in idx]


def mask(logits: np.ndarray[Any, np.dtype[np.float32]], ids: Sequence[int]) -> None:
    """Forbid ``ids`` at this step (``min_tokens``: no stop token yet)."""
    if ids:
        logits[np.asarray(ids, dtype=np.intp)] = _NEG_INF


def _describe(model: object) -> str:
    buf = ctypes.create_string_buffer(256)
    n = lc.llama_model_desc(model, buf, len(buf))
    return buf.value.decode("utf-8", "replace") if n > 0 else "llama.cpp model"
