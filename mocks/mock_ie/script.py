"""Scripted replies: make the mock engine emit a given text or token list, or misbehave.

A script is a JSON object ``{"rules": [...]}``. Each rule::

    {
      "match": "substring of the decoded prompt text",   # or "*" for any prompt
      "reply": "exact text to emit",                     # or "reply_tokens": [ids...]
      "finish": "stop" | "length",                       # how the reply ends (default stop)
      "fault": "drop" | "error" | "stall" | null,         # misbehave after fault_after tokens
      "fault_after": 0,
      "error_code": "overloaded" | "internal" | ...,      # for fault "error"
      "error_message": "...",
      "unguided": false,                                  # true: the reply wins over a
                                                          # guided query's format
      "pause_ms": 0, "pause_after": 1                     # wait this long before the token
    }                                                     # at this position (a stall)

The first rule whose ``match`` occurs in the prompt text wins. A rule with neither
``reply`` nor ``reply_tokens`` keeps the engine's default generated reply (useful to
inject a fault only).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from neutrino.engine.messages import ErrorCode

FaultKind = Literal["drop", "error", "stall"]
FinishKind = Literal["stop", "length"]

_FAULTS: tuple[FaultKind, ...] = ("drop", "error", "stall")
_FINISHES: tuple[FinishKind, ...] = ("stop", "length")
_KEYS = frozenset(
    {
        "match",
        "reply",
        "reply_tokens",
        "finish",
        "fault",
        "fault_after",
        "error_code",
        "error_message",
        "unguided",
        "pause_ms",
        "pause_after",
    }
)
_MAX_ID = 2**32 - 1


class ScriptError(ValueError):
    """A script that cannot be used; the message names the file and the bad rule."""


@dataclass(frozen=True)
class Rule:
    match: str
    reply: str | None = None
    reply_tokens: tuple[int, ...] | None = None
    finish: FinishKind = "stop"
    fault: FaultKind | None = None
    fault_after: int = 0
    error_code: ErrorCode = ErrorCode.INTERNAL
    error_message: str = "injected fault"
    unguided: bool = False  # an engine that ignores the requested format
    pause_ms: float = 0.0  # a stall this long before the token at pause_after
    pause_after: int = 0

    def matches(self, prompt_text: str) -> bool:
        return self.match == "*" or self.match in prompt_text


def _error_code(name: str) -> ErrorCode:
    key = name.strip().upper().replace("-", "_")
    if key == "INVALIDREQUEST":
        key = "INVALID_REQUEST"
    elif key == "UNKNOWNMODEL":
        key = "UNKNOWN_MODEL"
    elif key == "CONTEXTLENGTH":
        key = "CONTEXT_LENGTH"
    try:
        return ErrorCode[key]
    except KeyError:
        known = ", ".join(c.name.lower() for c in ErrorCode)
        raise ValueError(f"unknown error_code {name!r} (known: {known})") from None


def _parse_rule(raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        raise ValueError(f"a rule must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ValueError(f"unknown keys {unknown}")
    match = raw.get("match")
    if not isinstance(match, str):
        raise ValueError("'match' must be a string (use \"*\" to match any prompt)")
    reply = raw.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise ValueError("'reply' must be a string")
    tokens_raw = raw.get("reply_tokens")
    reply_tokens: tuple[int, ...] | None = None
    if tokens_raw is not None:
        if reply is not None:
            raise ValueError("give either 'reply' or 'reply_tokens', not both")
        if not isinstance(tokens_raw, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= _MAX_ID for t in tokens_raw
        ):
            raise ValueError("'reply_tokens' must be a list of token ids (0 .. 2**32-1)")
        reply_tokens = tuple(tokens_raw)
    finish = raw.get("finish", "stop")
    if finish not in _FINISHES:
        raise ValueError(f"'finish' must be one of {list(_FINISHES)}, got {finish!r}")
    fault = raw.get("fault")
    if fault is not None and fault not in _FAULTS:
        raise ValueError(f"'fault' must be one of {list(_FAULTS)} or null, got {fault!r}")
    fault_after = raw.get("fault_after", 0)
    if not isinstance(fault_after, int) or isinstance(fault_after, bool) or fault_after < 0:
        raise ValueError("'fault_after' must be a non-negative integer")
    if "fault_after" in raw and fault is None:
        raise ValueError("'fault_after' needs a 'fault'")
    code = ErrorCode.INTERNAL
    if "error_code" in raw:
        if not isinstance(raw["error_code"], str):
            raise ValueError("'error_code' must be a string")
        code = _error_code(raw["error_code"])
    message = raw.get("error_message", "injected fault")
    if not isinstance(message, str):
        raise ValueError("'error_message' must be a string")
    if ("error_code" in raw or "error_message" in raw) and fault != "error":
        raise ValueError("'error_code'/'error_message' need \"fault\": \"error\"")
    unguided = raw.get("unguided", False)
    if not isinstance(unguided, bool):
        raise ValueError("'unguided' must be true or false")
    pause_ms, pause_after = raw.get("pause_ms", 0), raw.get("pause_after", 1)
    if not isinstance(pause_ms, int | float) or isinstance(pause_ms, bool) or pause_ms < 0:
        raise ValueError("'pause_ms' must be a non-negative number")
    if not isinstance(pause_after, int) or isinstance(pause_after, bool) or pause_after < 1:
        raise ValueError("'pause_after' must be a positive integer")
    if "pause_after" in raw and not pause_ms:
        raise ValueError("'pause_after' needs a 'pause_ms'")
    return Rule(
        match=match,
        reply=reply,
        reply_tokens=reply_tokens,
        finish=cast(FinishKind, finish),
        fault=cast(FaultKind | None, fault),
        fault_after=fault_after,
        error_code=code,
        error_message=message,
        unguided=unguided,
        pause_ms=float(pause_ms),
        pause_after=pause_after if pause_ms else 0,
    )


class Script:
    """An ordered list of rules; ``match`` returns the first rule that applies."""

    __slots__ = ("rules", "source")

    def __init__(self, rules: Sequence[Rule], *, source: str = "<rules>") -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.source = source

    @classmethod
    def from_rules(cls, rules: Sequence[Mapping[str, Any]], *, source: str = "<rules>") -> Script:
        """Build a script from rule objects as they appear in the JSON file."""
        if isinstance(rules, (str, bytes)) or not isinstance(rules, Sequence):
            raise ScriptError(f"{source}: 'rules' must be a list")
        parsed: list[Rule] = []
        for i, raw in enumerate(rules):
            try:
                parsed.append(_parse_rule(raw))
            except ValueError as exc:
                label = f" (match {raw.get('match')!r})" if isinstance(raw, Mapping) else ""
                raise ScriptError(f"{source}: rule {i}{label}: {exc}") from None
        return cls(parsed, source=source)

    @classmethod
    def from_json(cls, data: Any, *, source: str = "<script>") -> Script:
        """Build a script from a parsed JSON document ``{"rules": [...]}``."""
        if not isinstance(data, Mapping) or "rules" not in data:
            raise ScriptError(f"{source}: expected an object with a 'rules' list")
        extra = sorted(set(data) - {"rules"})
        if extra:
            raise ScriptError(f"{source}: unknown top-level keys {extra}")
        return cls.from_rules(data["rules"], source=source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Script:
        """Read a script file."""
        source = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise ScriptError(f"{source}: cannot read: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{source}: invalid JSON: {exc}") from None
        return cls.from_json(data, source=source)

    def match(self, prompt_text: str) -> Rule | None:
        for rule in self.rules:
            if rule.matches(prompt_text):
                return rule
        return None

    def __len__(self) -> int:
        return len(self.rules)
