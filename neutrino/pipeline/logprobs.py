"""Sans-IO: per-token log probabilities from engine results, in OpenAI's two shapes.

The engine sends, per generated token, its logprob and ``k`` alternatives (ids and
logprobs). Token text and bytes come from our tokenizer, so they match what the client
sees. Chat completions report ``{"content": [{token, logprob, bytes, top_logprobs}]}``;
completions report parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neutrino.engine.messages import TextResult
from neutrino.text.tokenizer import Tokenizer


@dataclass(slots=True)
class TokenLogprob:
    token: str
    token_bytes: bytes
    logprob: float
    top: list[tuple[str, bytes, float]]


class LogprobRecorder:
    """Turns the logprob fields of engine results into :class:`TokenLogprob` entries."""

    __slots__ = ("_cache", "_tok", "top_k")

    def __init__(self, tokenizer: Tokenizer, top_k: int) -> None:
        self._tok = tokenizer
        self.top_k = top_k
        self._cache: dict[int, tuple[str, bytes]] = {}

    def _text(self, token_id: int) -> tuple[str, bytes]:
        hit = self._cache.get(token_id)
        if hit is None:
            try:
                raw = self._tok.token_bytes(token_id)
            except (ValueError, IndexError, KeyError):
                raw = b""
            hit = (raw.decode("utf-8", "replace"), raw)
            self._cache[token_id] = hit
        return hit

    def entries(self, result: TextResult, count: int) -> list[TokenLogprob]:
        """Entries for the first ``count`` tokens of ``result`` (fewer if it has fewer)."""
        out: list[TokenLogprob] = []
        lps = result.logprobs
        k = result.top_logprobs
        n = min(count, len(result.tokens), len(lps))
        ids, alts = result.top_token_ids, result.top_token_logprobs
        want = min(k, self.top_k)
        for i in range(n):
            token, raw = self._text(result.tokens[i])
            top = []
            for j in range(i * k, i * k + want):
                if j < len(ids) and j < len(alts):
                    t, b = self._text(ids[j])
                    top.append((t, b, alts[j]))
            out.append(TokenLogprob(token, raw, lps[i], top))
        return out


def chat_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": e.token,
                "logprob": e.logprob,
                "bytes": list(e.token_bytes),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(b)} for t, b, lp in e.top
                ],
            }
            for e in entries
        ],
        "refusal": None,
    }


def completion_logprobs(entries: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """OpenAI's legacy shape; ``offset`` is the text length already sent (streaming)."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{t: lp for t, _, lp in e.top} for e in entries],
        "text_offset": offsets,
    }
