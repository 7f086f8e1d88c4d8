"""Sans-IO: the client side of one HTTP upstream in token mode, as ``engine/link.py`` is
a socket connection's: the queries in flight and their sinks, and what the bytes of each
query's streamed answer mean (SSE events, through the dialect's ``Answer``, to results
for the sink, a flush per read). The asyncio adapter (``pool.py``) does the HTTP.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from neutrino.engine.client import RequestOwner, StreamSink, classify_engine_error, sink_failure
from neutrino.engine.messages import EngineError, TextResult
from neutrino.errors import NeutrinoError
from neutrino.sse_decoder import SSEDecoder

MAX_EVENT_BYTES = 4 * 1024 * 1024


class Answer(Protocol):
    """A dialect's reading of one streamed answer (``llamacpp.Answer``, ``vllm.Answer``)."""

    done: bool
    cut: bool  # it ended at a stop id while the server generates on

    def event(self, data: str | bytes) -> TextResult | EngineError | None: ...


class Stream:
    """One query in flight: its sink, the task doing its HTTP request, its answer."""

    __slots__ = ("answer", "decoder", "sink", "task")

    def __init__(self, sink: StreamSink) -> None:
        self.sink = sink
        self.task: asyncio.Task[None] | None = None
        self.answer: Answer | None = None
        self.decoder = SSEDecoder(MAX_EVENT_BYTES)


class UpstreamLink:
    """The queries in flight on one upstream, and their answers' bytes read."""

    __slots__ = ("_next_rid", "name", "streams")

    def __init__(self, name: str) -> None:
        self.name = name
        self.streams: dict[int, Stream] = {}
        self._next_rid = 0

    def open(self, sink: StreamSink) -> tuple[int, Stream]:
        self._next_rid += 1
        stream = self.streams[self._next_rid] = Stream(sink)
        return self._next_rid, stream

    def close(self, rid: int) -> Stream | None:
        """The query is over on our side (cancelled, forgotten): its stream, if it had one."""
        return self.streams.pop(rid, None)

    def in_flight(self, owner: RequestOwner) -> list[tuple[RequestOwner, int, StreamSink]]:
        return [(owner, rid, s.sink) for rid, s in self.streams.items()]

    def fail(self, rid: int, error: NeutrinoError) -> None:
        stream = self.streams.pop(rid, None)
        if stream is not None:
            stream.sink.on_error(error)

    def feed(self, rid: int, stream: Stream, chunk: bytes) -> bool:
        """One read of the query's answer: its results to the sink, then one flush;
        True once the answer is over (complete, failed, or refused by its sink)."""
        answer = stream.answer
        assert answer is not None
        sink = stream.sink
        flush = False
        for _kind, data in stream.decoder.feed(chunk):
            out = answer.event(data)
            if out is None:
                continue
            if isinstance(out, EngineError):
                self.fail(rid, classify_engine_error(out, self.name))
                return True
            if answer.done:
                self.streams.pop(rid, None)
            try:
                flush = sink.on_result(out) or flush
            except Exception as exc:  # the sink refused: the request ends with why
                self.streams.pop(rid, None)
                sink.on_error(sink_failure(exc))
                return True
            if answer.done:
                break
        if flush:
            sink.flush()
        return answer.done
