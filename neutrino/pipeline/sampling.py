"""How a request asks to be sampled and stopped: the typed rules and their validators.

:class:`SamplingParams` and :class:`StopRules` are frozen and protocol-neutral. Each field
has one validator here (:data:`SAMPLING`); a front end hands it the client's value and
where the value is in its protocol (a :data:`~neutrino.pipeline.fields.Loc`), so the rules
are the same for every protocol and an error names the field as the client sent it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from neutrino.config import LimitsConfig
from neutrino.pipeline.fields import (
    MAX_INT,
    Loc,
    boolean,
    integer,
    invalid,
    is_int,
    is_num,
    number,
)

MAX_TOP_LOGPROBS = 20


class SamplingParams(msgspec.Struct, frozen=True, gc=False):
    max_tokens: int | None = None  # None: what the context (and budget) leaves
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1: off
    min_p: float = 0.0
    seed: int | None = None  # 0 .. 2**64 - 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    ignore_eos: bool = False
    # Token id -> bias, -100 to 100 (checked against the vocabulary once it is known).
    # Engines do not apply it yet: the engine protocol has no field for it.
    logit_bias: Mapping[int, float] | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    # The fields the client gave (None: all of them): the model's own defaults (its
    # folder's generation_config.json) fill the others.
    given: frozenset[str] | None = None


class StopRules(msgspec.Struct, frozen=True, gc=False):
    strings: tuple[str, ...] = ()
    token_ids: tuple[int, ...] = ()
    include_in_output: bool = False  # a matched stop string stays in the text


# ----------------------------------------------------------------------------- validators


def top_p(v: object, at: Loc) -> float:
    p = number(v, at, 0.0, 1.0)
    if p == 0.0:
        raise invalid(at, "{at} must be greater than 0")
    return p


def top_k(v: object, at: Loc) -> int:
    k = integer(v, at, -1)
    return -1 if k == 0 else k


def seed(v: object, at: Loc) -> int:
    if not is_int(v) or not -(1 << 63) <= v < (1 << 64):
        raise invalid(at, "{at} must be an integer")
    return v % (1 << 64)


def token_ids(v: object, at: Loc) -> tuple[int, ...]:
    if not isinstance(v, list | tuple) or not all(is_int(t) and 0 <= t <= MAX_INT for t in v):
        raise invalid(at, "{at} must be a list of non-negative integers")
    return tuple(v)


def logit_bias(v: object, at: Loc, limits: LimitsConfig) -> dict[int, float] | None:
    """Token id (a string of digits, as JSON keys are) -> bias from -100 to 100; at most
    ``max_logit_bias`` entries (the vocabulary is checked once the model's is known)."""
    if not isinstance(v, Mapping):
        raise invalid(at, "{at} must be an object of token ids to biases")
    if len(v) > limits.max_logit_bias:
        raise invalid(
            at, f"{{at}} has {len(v)} entries; at most {limits.max_logit_bias} are allowed"
        )
    bias: dict[int, float] = {}
    for key, value in v.items():
        key = str(key)
        if not (key.isascii() and key.isdigit() and len(key) <= 10):
            raise invalid(at, f"Invalid key in {{at}}: {key[:32]!r} is not a token id")
        if not is_num(value) or not -100 <= value <= 100:
            raise invalid(at, f"{{at}}[{key}] must be a number between -100 and 100")
        bias[int(key)] = float(value)
    return bias or None


def stops(v: object, at: Loc, limits: LimitsConfig) -> tuple[str, ...]:
    """Stop strings: one or a bounded list of bounded, non-empty strings."""
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list | tuple) or not all(isinstance(s, str) for s in v):
        raise invalid(at, "{at} must be a string or a list of strings")
    if len(v) > limits.max_stop_sequences:
        raise invalid(at, f"{{at}} accepts at most {limits.max_stop_sequences} sequences")
    for s in v:
        if not s:
            raise invalid(at, "{at} sequences must not be empty")
        if len(s) > limits.max_stop_chars:
            raise invalid(
                at, f"each {{at}} sequence must be at most {limits.max_stop_chars} characters"
            )
    return tuple(v)


# The validators below take a value of the right type and range at once, without a call;
# anything else goes to the checker that takes it, or names what is wrong with it.


def _num(lo: float, hi: float) -> Callable[[object, Loc, LimitsConfig], object]:
    def check(v: object, at: Loc, limits: LimitsConfig) -> object:
        if v.__class__ is float and lo <= v <= hi:
            return v
        return number(v, at, lo, hi)

    return check


def _int(lo: int, hi: int = MAX_INT) -> Callable[[object, Loc, LimitsConfig], object]:
    def check(v: object, at: Loc, limits: LimitsConfig) -> object:
        if v.__class__ is int and lo <= v <= hi:
            return v
        return integer(v, at, lo, hi)

    return check


def _flag(v: object, at: Loc, limits: LimitsConfig) -> object:
    return v if v is True or v is False else boolean(v, at)


def _plain(check: Callable[[object, Loc], object]) -> Callable[[object, Loc, LimitsConfig], object]:
    return lambda v, at, limits: check(v, at)


# The SamplingParams field -> its validator (value, where, limits) -> checked value.
SAMPLING: dict[str, Callable[[object, Loc, LimitsConfig], object]] = {
    "max_tokens": _int(1),
    "temperature": _num(0.0, 2.0),
    "top_p": _plain(top_p),
    "top_k": _plain(top_k),
    "min_p": _num(0.0, 1.0),
    "seed": _plain(seed),
    "presence_penalty": _num(-2.0, 2.0),
    "frequency_penalty": _num(-2.0, 2.0),
    "repetition_penalty": _num(0.0, 2.0),
    "min_tokens": _int(0),
    "ignore_eos": _flag,
    "logit_bias": logit_bias,
    "logprobs": _flag,
    "top_logprobs": _int(0, MAX_TOP_LOGPROBS),
}


def choices(v: object, at: Loc, limits: LimitsConfig) -> int:
    """``n``: how many choices, at most ``[limits] max_n``."""
    n = integer(v, at, 1)
    if n > limits.max_n:
        raise invalid(at, f"{{at}} must be at most {limits.max_n} on this server")
    return n
