"""One request relayed to a passthrough upstream, from its answer's first byte to its end
(OpenAI's chat and completions, Anthropic's messages).

The front end writes the upstream's bytes to its client as they come; this watches them
pass (``Tally``: its SSE events, or the whole JSON answer) for what Neutrino reports of
every request: the first token's time (the lifecycle's Generating), the tokens (the
upstream's own usage when it sends one, else a count of the chunks that carry output),
the finish reason, an error event. It ends the request once, as a generation ends:
Complete, Failed (the upstream broke off or sent an error), Cancelled (the client left)
or Failed by a deadline or a shutdown (``abort``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from time import monotonic_ns
from typing import Any

import orjson

from neutrino.engine.client import Relayed
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.metrics import Gaps
from neutrino.pipeline.admission import OPEN, Ticket
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.deadlines import Deadline, DeadlineWheel
from neutrino.pipeline.history import Spent
from neutrino.pipeline.observe import Observed
from neutrino.pipeline.state import Lifecycle, State
from neutrino.sse_decoder import SSEDecoder, SSEError

MAX_EVENT_BYTES = 4 * 1024 * 1024
log = logging.getLogger("neutrino.engine")


class Tally:
    """What a relayed answer said of itself (sans-IO): feed its bytes, read the counts."""

    def __init__(self, streamed: bool) -> None:
        self._decoder = SSEDecoder(MAX_EVENT_BYTES) if streamed else None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self._usage = False  # the upstream's own usage was seen (it wins over the count)
        self.finish_reason: str | None = None
        self.error: NeutrinoError | None = None
        self.output = False  # some output was seen (the first token's time is set)
        self.deliveries = 0  # events that carried output
        self.finished = False  # the stream's last event passed ([DONE], message_stop)

    def feed(self, chunk: bytes) -> None:
        """A stream's next bytes (SSEError when an event breaks the format's bounds)."""
        assert self._decoder is not None
        for _kind, data in self._decoder.feed(chunk):
            if data == "[DONE]":
                self.finished = True
                continue
            try:
                doc = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue  # not ours to judge: the client gets it as sent
            if isinstance(doc, dict):
                self._event(doc)

    def whole(self, body: bytes) -> bool:
        """A non-streamed answer, whole: whether it is a JSON object."""
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(doc, dict):
            return False
        self._event(doc)
        self.output = True
        return True

    def _event(self, doc: dict[str, Any]) -> None:
        choices = doc.get("choices")
        if choices.__class__ is list:  # an OpenAI chunk (or answer): the common case
            for choice in choices:
                if choice.__class__ is dict:
                    self._choice(choice)
            usage = doc.get("usage")
            if usage.__class__ is dict:
                self._take_usage(usage)
            if "error" in doc:
                self._error(doc["error"])
            return
        kind = doc.get("type")
        if isinstance(kind, str) and kind != "error":  # Anthropic's Messages API
            self._anthropic(kind, doc)
            return
        if doc.get("error") is not None:
            self._error(doc["error"])
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self._take_usage(usage)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if delta.__class__ is dict:
            out = (
                delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content")
                or delta.get("reasoning")
            )  # fmt: skip
        else:
            out = choice.get("text") or choice.get("message")
        if out:
            self.output = True
            self.deliveries += 1
            if not self._usage:
                self.completion_tokens += 1
        reason = choice.get("finish_reason")
        if reason.__class__ is str:
            self.finish_reason = reason

    def _error(self, err: object) -> None:
        if err is None:
            return
        message = err.get("message") if isinstance(err, dict) else err
        self.error = NeutrinoError(
            ErrorKind.ENGINE_ERROR, f"the upstream failed: {str(message)[:300]}"
        )

    def _anthropic(self, kind: str, doc: dict[str, Any]) -> None:
        """An event of a Messages stream, or a whole message."""
        if kind == "message_stop":
            self.finished = True
        if kind == "content_block_delta":
            self.output = True
            self.deliveries += 1
            if not self._usage:
                self.completion_tokens += 1
            return
        message = doc.get("message") if kind == "message_start" else doc
        usage = message.get("usage") if isinstance(message, dict) else None
        if isinstance(usage, dict):
            prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
            if type(prompt) is int:
                self.prompt_tokens = prompt
            if type(completion) is int and kind != "message_start":
                self._usage = True
                self.completion_tokens = completion
            cached = usage.get("cache_read_input_tokens")
            if type(cached) is int:
                self.cached_tokens = cached
        delta = doc.get("delta") if kind == "message_delta" else doc
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        if isinstance(reason, str):
            self.finish_reason = reason
        if kind == "message" and doc.get("content"):
            self.output = True

    def _take_usage(self, usage: dict[str, Any]) -> None:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if type(prompt) is int and type(completion) is int:
            self._usage = True
            self.prompt_tokens, self.completion_tokens = prompt, completion
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            self.cached_tokens = cached if type(cached) is int else 0


class RelayCall:
    """A relayed request at its upstream: the answer to pass on, and its one end."""

    def __init__(
        self,
        *,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        relayed: Relayed,
        streamed: bool,
        on_done: Callable[[RelayCall], None],
    ) -> None:
        self.request_id = request_id
        self.model = model
        self.lifecycle = lifecycle
        self.content_type = relayed.content_type
        self.streamed = streamed and relayed.content_type.startswith("text/event-stream")
        self.tally = Tally(self.streamed)
        self._gaps: Gaps | None = None
        self._relayed = relayed
        self._on_done = on_done
        self._error: NeutrinoError | None = None
        self._timer: Deadline | None = None
        self.principal: Principal | None = None
        self.ticket: Ticket = OPEN  # its place in the fair shares and its key\'s limits
        self.obs: Observed | None = None
        self.route = ""  # relayed answers are never routed by a manifest route
        self.hops: list[tuple[str, str]] | None = None  # nor moved

    def attach(self, timeout_s: float, deadlines: DeadlineWheel) -> None:
        self._timer = deadlines.call_later(timeout_s, self._on_timeout)

    @property
    def error(self) -> NeutrinoError | None:
        return self._error

    async def chunks(self) -> AsyncIterator[bytes]:
        """The streamed answer's bytes as they arrive, whole events only (raises the
        request's error when the upstream broke off, sent an event past its bound, or
        when a deadline or a shutdown ended it)."""
        tally = self.tally
        held = b""  # the start of an event not ended yet: passed on once it ends
        try:
            async for chunk in self._relayed.chunks():
                if self.lifecycle.terminal:
                    break
                seen = tally.deliveries
                tally.feed(chunk)  # an event past its bound: SSEError
                if tally.deliveries != seen:
                    self._delivered()
                if tally.output and self.lifecycle.state is State.PROCESSING:
                    self.lifecycle.advance(State.GENERATING)
                data = held + chunk if held else chunk
                cut = _events_end(data)
                held = data[cut:]
                if cut:
                    yield data[:cut] if held else data
            if held and not self.lifecycle.terminal:
                yield held  # the upstream ended inside an event: as it sent it
        except (NeutrinoError, SSEError) as exc:
            err = exc if isinstance(exc, NeutrinoError) else _malformed()
            self._end(State.FAILED, err)
        if self._error is not None:
            raise self._error.fresh()
        self._end(State.COMPLETE if tally.error is None else State.FAILED, tally.error)

    async def body(self, limit: int) -> bytes:
        """The non-streamed answer, whole (raises the request's error: its deadline's
        when that ended it; a 502 for a body that is not JSON)."""
        try:
            data = await self._relayed.read(limit)
        except NeutrinoError as err:
            self._end(State.FAILED, err)
            raise (self._error or err).fresh() from None
        if self.lifecycle.state is State.PROCESSING:
            self.lifecycle.advance(State.GENERATING)
        if not self.tally.whole(data):
            log.warning("upstream answer for %s is not JSON (%d bytes): %r", self.model,
                        len(data), data[:200])  # fmt: skip
            bad = NeutrinoError(ErrorKind.ENGINE_ERROR, "the upstream's answer is not JSON")
            self._end(State.FAILED, bad)
            raise bad.fresh()
        self._end(State.COMPLETE, None)
        return data

    def close(self, reason: str = "client disconnected") -> None:
        """The front end is done with it: if it has not ended, the client left (after
        the stream's last event had passed, it is complete: a client need not wait for
        the upstream's end of body)."""
        tally = self.tally
        if tally.finished and tally.error is None:
            self._end(State.COMPLETE, None)
            return
        self._end(State.CANCELLED, NeutrinoError(ErrorKind.CANCELLED, "the request was cancelled"))

    def abort(self, error: NeutrinoError, reason: str) -> None:
        """Ended from the server's side (a deadline, a shutdown)."""
        self._end(State.FAILED, error)

    def _on_timeout(self) -> None:
        self._timer = None
        self.abort(NeutrinoError(ErrorKind.TIMEOUT, "the request timed out"), "timeout")

    def _end(self, state: State, error: NeutrinoError | None) -> None:
        if self.lifecycle.terminal:
            return
        self._error = error
        self.lifecycle.advance(state)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._relayed.close()
        self._on_done(self)

    def _delivered(self) -> None:
        """A chunk carried output: a delivery of tokens (the gaps between them)."""
        if self._gaps is None:
            self._gaps = Gaps(monotonic_ns())
        else:
            self._gaps.add(monotonic_ns())

    def gaps(self) -> Gaps | None:
        """The gaps between the streamed answer's deliveries (None: fewer than two)."""
        gaps = self._gaps
        return gaps if gaps is not None and any(gaps.counts) else None

    def spent(self) -> Spent:
        t = self.tally
        return Spent(t.prompt_tokens, t.completion_tokens, t.cached_tokens, 0, t.finish_reason)


def _events_end(data: bytes) -> int:
    """Where the last whole event of ``data`` ends (after its blank line; 0: none)."""
    lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 3 if crlf >= 0 else 0)


def _malformed() -> NeutrinoError:
    return NeutrinoError(ErrorKind.ENGINE_ERROR, "the upstream's stream broke the SSE format")
