"""The upstream link, sans-IO: an HTTP upstream's answer bytes, fed read by read, become
results for the query's sink with one flush per read, whatever the reads' boundaries;
an engine error, a refusing sink and the end of the answer each end the query once."""

from __future__ import annotations

import orjson

from neutrino.engine.messages import ModalResult, Sampling, TextQuery, TextResult
from neutrino.engine.upstream import llamacpp
from neutrino.engine.upstream.link import Stream, UpstreamLink
from neutrino.errors import ErrorKind, NeutrinoError


class Sink:
    def __init__(self, refuse: bool = False) -> None:
        self.results: list[TextResult] = []
        self.flushes = 0
        self.errors: list[NeutrinoError] = []
        self.refuse = refuse

    def on_result(self, result: TextResult) -> bool:
        if self.refuse:
            raise ValueError("cannot render")
        self.results.append(result)
        return True

    def on_tokens(self, tokens: list[int]) -> bool:
        raise AssertionError("an upstream sends results")

    def on_modal(self, result: ModalResult) -> None:
        raise AssertionError("an upstream sends results")

    def on_moved(self, engine: str, reason: str) -> None:
        pass

    def on_error(self, error: NeutrinoError) -> None:
        self.errors.append(error)

    def flush(self) -> None:
        self.flushes += 1


def _sse(**fields: object) -> bytes:
    doc = {"index": 0, "content": "", "stop": False, **fields}
    return b"data: " + orjson.dumps(doc) + b"\n\n"


QUERY = TextQuery("m", [1, 2], Sampling(max_tokens=8))
ANSWER = _sse(tokens=[10, 11]) + _sse(tokens=[12]) + _sse(tokens=[13], stop=True, stop_type="limit")


def _open(sink: Sink) -> tuple[UpstreamLink, int, Stream]:
    link = UpstreamLink("up")
    rid, stream = link.open(sink)
    stream.answer = llamacpp.Answer(QUERY)
    return link, rid, stream


def test_any_split_of_the_answer_gives_the_same_tokens_and_a_flush_per_read() -> None:
    for size in (1, 7, 40, len(ANSWER)):
        sink = Sink()
        link, rid, stream = _open(sink)
        reads = [ANSWER[i : i + size] for i in range(0, len(ANSWER), size)]
        over = [link.feed(rid, stream, r) for r in reads]
        assert over[-1] is True and not any(over[:-1])
        assert [t for r in sink.results for t in r.tokens] == [10, 11, 12, 13]
        assert sink.results[-1].finish_reason.name == "LENGTH"
        assert 1 <= sink.flushes <= len(reads) and not sink.errors
        assert rid not in link.streams  # the finished query is no longer in flight


def test_an_error_event_ends_the_query_with_the_engine_error() -> None:
    sink = Sink()
    link, rid, stream = _open(sink)
    error = b'data: {"error": {"code": 500, "message": "boom", "type": "server_error"}}\n\n'
    assert link.feed(rid, stream, _sse(tokens=[5]) + error)
    assert [e.kind for e in sink.errors] == [ErrorKind.ENGINE_ERROR]
    assert rid not in link.streams


def test_a_sink_that_refuses_ends_the_query_once() -> None:
    sink = Sink(refuse=True)
    link, rid, stream = _open(sink)
    assert link.feed(rid, stream, ANSWER)
    assert len(sink.errors) == 1 and sink.errors[0].kind is ErrorKind.INTERNAL
    assert rid not in link.streams and not link.streams
