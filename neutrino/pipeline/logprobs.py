"""Sans-IO: per-token log probabilities from engine results, in OpenAI's two shapes.

The engine sends, per generated token, its logprob and ``k`` alternatives (ids and
logprobs). Token text and bytes come from our tokenizer, so they match what the client
sees. Chat completions report ``{"content": [{token, logprob, bytes, top_logprobs}]}``;
completions report parallel lists (``tokens``, ``token_logprobs``, ``top_logprobs``,
``text_offset``).

A non-streamed answer keeps every token's figures until it is rendered: as arrays
(:class:`LogprobColumns`), not objects (8 choices of 4,000 tokens with 20 alternatives
each are 672,000 figures: some 10 MB as arrays, over 100 MB as tuples), turned into
entries a slice at a time when the answer is written.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

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

    def text(self, token_id: int) -> tuple[str, bytes]:
        """A token's text and bytes, as entries show them."""
        return self._text(token_id)

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


# A large answer is rendered this many tokens' logprobs at a time (each with up to 20
# alternatives); one with more figures than WHOLE_FIGURES (tokens, plus alternatives)
# is large, a smaller one is rendered whole.
SLICE_TOKENS = 32
WHOLE_FIGURES = 4096


def large(columns: list[LogprobColumns | None]) -> bool:
    """Whether an answer with these logprobs is rendered a slice at a time."""
    figures = sum(len(c) * (1 + c.k) for c in columns if c is not None)
    return figures > WHOLE_FIGURES


class LogprobColumns:
    """Every reported token's logprob and ``k`` alternatives, for one generation, in
    arrays (alternative ids of -1 pad a token that came with fewer)."""

    __slots__ = ("_rec", "ids", "k", "lps", "top_ids", "top_lps")

    def __init__(self, recorder: LogprobRecorder) -> None:
        self._rec = recorder
        self.k = recorder.top_k
        self.ids = array("q")
        self.lps = array("d")
        self.top_ids = array("q")
        self.top_lps = array("d")

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, result: TextResult, count: int) -> None:
        """The first ``count`` tokens of ``result`` (fewer if it has fewer)."""
        n = min(count, len(result.tokens), len(result.logprobs))
        self.ids.extend(result.tokens[:n])
        self.lps.extend(result.logprobs[:n])
        want, k = self.k, result.top_logprobs
        if not want:
            return
        ids, alts = result.top_token_ids, result.top_token_logprobs
        if k == want and len(ids) >= n * k and len(alts) >= n * k:  # the usual shape
            self.top_ids.extend(ids[: n * k])
            self.top_lps.extend(alts[: n * k])
            return
        for i in range(n):
            for j in range(i * k, i * k + want):
                if j < i * k + k and j < len(ids) and j < len(alts):
                    self.top_ids.append(ids[j])
                    self.top_lps.append(alts[j])
                else:
                    self.top_ids.append(-1)
                    self.top_lps.append(0.0)

    def drop(self, count: int) -> None:
        """Forget the last ``count`` tokens."""
        if count > 0:
            keep = max(0, len(self.ids) - count)
            del self.ids[keep:], self.lps[keep:]
            del self.top_ids[keep * self.k :], self.top_lps[keep * self.k :]

    def slices(self) -> Iterator[list[TokenLogprob]]:
        """Every token's entry, SLICE_TOKENS at a time (a large answer's rendering)."""
        for start in range(0, len(self.ids), SLICE_TOKENS):
            yield self.entries(start, start + SLICE_TOKENS)

    def entries(self, start: int = 0, stop: int | None = None) -> list[TokenLogprob]:
        """Tokens ``start`` to ``stop`` as entries."""
        text, k = self._rec.text, self.k
        ids, lps, top_ids, top_lps = self.ids, self.lps, self.top_ids, self.top_lps
        out: list[TokenLogprob] = []
        for i in range(start, len(ids) if stop is None else min(stop, len(ids))):
            token, raw = text(ids[i])
            top = []
            for j in range(i * k, i * k + k):
                alt = top_ids[j]
                if alt >= 0:
                    t, b = text(alt)
                    top.append((t, b, top_lps[j]))
            out.append(TokenLogprob(token, raw, lps[i], top))
        return out


def chat_entries(entries: list[TokenLogprob]) -> list[dict[str, object]]:
    """Chat's (and the Responses API's) per-token objects."""
    return [
        {
            "token": e.token,
            "logprob": e.logprob,
            "bytes": list(e.token_bytes),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(b)} for t, b, lp in e.top],
        }
        for e in entries
    ]


def chat_logprobs(entries: list[TokenLogprob]) -> dict[str, object]:
    return {"content": chat_entries(entries), "refusal": None}


def completion_logprobs(entries: list[TokenLogprob], offset: int = 0) -> dict[str, object]:
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
