"""Tracing with real processes: a mock engine, Neutrino with ``[tracing]`` set, and a real
OTLP/gRPC receiver (tests/support/otlp.py). The span tree of a request, its GenAI
attributes, the traceparent the engine frame carried; and a collector that is down costs
neither request latency nor a slow shutdown."""

from __future__ import annotations

import http.client
import json
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import grpc

from neutrino.v1 import inference_pb2, inference_pb2_grpc
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.procs import MockIE, NeutrinoProc, free_port

MODEL = "qwen2.5-mock"
EMBED_MODEL = "embed-mock"
CHAT_ORDER = ("parse", "template", "tokenize", "queue", "engine")
CHAT_CHILDREN = set(CHAT_ORDER)
ENGINE_CHILDREN = {"prefill", "decode"}
CHAT_SPANS = 1 + len(CHAT_CHILDREN) + len(ENGINE_CHILDREN)
EMBED_SPANS = 1 + 2 + len(ENGINE_CHILDREN)  # no parse/template/tokenize phases: queue, engine


def config(mock: MockIE, endpoint: str = "", shutdown_timeout_s: float = 2.0) -> str:
    cfg = f'[[engines]]\nsocket = "{mock.socket}"\n'
    if endpoint:
        cfg += f'[tracing]\nendpoint = "{endpoint}"\nshutdown_timeout_s = {shutdown_timeout_s}\n'
    return cfg


def traceparent(n: int, flags: str = "01") -> tuple[str, str, str]:
    """A valid incoming traceparent: (header, trace id, parent span id)."""
    trace_id = f"{0x4BF92F3577B34DA6A3CE929D0E0E4700 + n:032x}"
    parent = f"{0x00F067AA0BA90200 + n:016x}"
    return f"00-{trace_id}-{parent}-{flags}", trace_id, parent


def post(
    conn: http.client.HTTPConnection, path: str, body: dict[str, Any], tp: str | None = None
) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    if tp is not None:
        headers["traceparent"] = tp
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def chat_body(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell me a story"}],
        "max_tokens": 12,
        "seed": 3,
    }
    body.update(kw)
    return body


def sse(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


class Tree:
    """The spans received, by trace and by parent."""

    def __init__(self, spans: list[ReceivedSpan]) -> None:
        self.spans = spans
        self.roots = [s for s in spans if s.kind == "SERVER"]

    def root(self, trace_id: str) -> ReceivedSpan:
        roots = [s for s in self.roots if s.trace_id == trace_id]
        assert len(roots) == 1, (trace_id, [(s.name, s.trace_id) for s in self.roots])
        return roots[0]

    def children(self, span: ReceivedSpan) -> dict[str, ReceivedSpan]:
        kids = [s for s in self.spans if s.parent_span_id == span.span_id]
        by_name = {s.name: s for s in kids}
        assert len(by_name) == len(kids), [s.name for s in kids]
        for kid in kids:
            assert kid.trace_id == span.trace_id
            assert kid.kind == "INTERNAL", (kid.name, kid.kind)
            assert span.start_ns <= kid.start_ns <= kid.end_ns <= span.end_ns, kid.name
        return by_name

    def check(self, root: ReceivedSpan, chat: bool = True) -> dict[str, ReceivedSpan]:
        """The request span's tree, checked; its spans by name."""
        assert root.kind == "SERVER"
        assert root.status != "ERROR", root.status_message
        kids = self.children(root)
        want = CHAT_CHILDREN if chat else {"queue", "engine"}  # no text to template
        assert set(kids) == want, sorted(kids)
        engine = kids["engine"]
        inner = self.children(engine)
        assert set(inner) == ENGINE_CHILDREN, sorted(inner)
        assert set(self.children(inner["prefill"])) == set()
        assert set(self.children(inner["decode"])) == set()
        # The phases follow one another: each starts where (or after) the last ended.
        for a, b in pairwise(CHAT_ORDER if chat else CHAT_ORDER[3:]):
            assert kids[a].end_ns <= kids[b].start_ns, (a, b)
        if chat:
            assert kids["parse"].start_ns == root.start_ns  # from the front end's receipt
        assert inner["prefill"].start_ns == engine.start_ns
        assert inner["prefill"].end_ns == inner["decode"].start_ns
        assert inner["decode"].end_ns == engine.end_ns == root.end_ns
        return {"root": root, **kids, **inner}


def engine_traceparents(mock: MockIE) -> dict[str, str]:
    """The traceparent each engine query frame carried, by trace id."""
    out = {}
    for ev in mock.events("query"):
        tp = ev["traceparent"]
        assert tp, ev  # tracing is on: every frame carries one
        out[tp.split("-")[1]] = tp
    return out


def check_chat_attrs(
    root: ReceivedSpan, response_id: str, usage: dict[str, Any], finish: str, protocol: str
) -> None:
    a = root.attributes
    assert root.name == f"chat {MODEL}"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == MODEL
    assert a["gen_ai.provider.name"] == "neutrino"
    assert a["gen_ai.request.max_tokens"] == 12
    assert a["gen_ai.request.seed"] == 3
    assert a["gen_ai.usage.input_tokens"] == usage["prompt_tokens"] > 0
    assert a["gen_ai.usage.output_tokens"] == usage["completion_tokens"] > 0
    assert a["gen_ai.response.finish_reasons"] == [finish]
    assert a["gen_ai.response.id"] == a["neutrino.request_id"] == response_id
    assert a["gen_ai.response.model"] == MODEL
    assert a["gen_ai.request.temperature"] == a["gen_ai.request.top_p"] == 1.0
    assert a["neutrino.protocol"] == protocol
    assert a["neutrino.route"] == "chat"
    assert root.resource["service.name"] == "neutrino"


def test_spans_reach_a_real_collector(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    with OtlpReceiver() as receiver:
        mock = mock_factory("--ttft-ms", "5", "--itl-ms", "1")
        grpc_address = f"127.0.0.1:{free_port()}"
        server = neutrino_factory(
            "--grpc-address", grpc_address, config=config(mock, receiver.endpoint)
        )
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            # Non-streamed, with a traceparent.
            tp1, trace1, parent1 = traceparent(1)
            status, raw = post(conn, "/v1/chat/completions", chat_body(), tp1)
            assert status == 200, raw
            plain = json.loads(raw)
            # Streamed, with a traceparent.
            tp2, trace2, parent2 = traceparent(2)
            body = chat_body(stream=True, stream_options={"include_usage": True})
            status, raw = post(conn, "/v1/chat/completions", body, tp2)
            assert status == 200, raw
            chunks = sse(raw)
            # Without one: a new trace.
            status, raw = post(conn, "/v1/chat/completions", chat_body())
            assert status == 200, raw
            untraced = json.loads(raw)
            # A parent that did not sample: no spans, the engine still gets a traceparent.
            tp0, trace0, parent0 = traceparent(0, flags="00")
            status, raw = post(conn, "/v1/chat/completions", chat_body(), tp0)
            assert status == 200, raw
            # Embeddings, with a traceparent.
            tp4, trace4, parent4 = traceparent(4)
            body = {"model": EMBED_MODEL, "input": ["hello", "world"]}
            status, raw = post(conn, "/v1/embeddings", body, tp4)
            assert status == 200, raw
            embedded = json.loads(raw)
            # A request that fails before the engine: a span of status ERROR.
            tp5, trace5, parent5 = traceparent(5)
            status, raw = post(conn, "/v1/chat/completions", chat_body(model="no-such"), tp5)
            assert status == 404, raw
        finally:
            conn.close()
        # gRPC Generate, the traceparent in its metadata.
        tp3, trace3, parent3 = traceparent(3)
        with grpc.insecure_channel(grpc_address) as channel:
            stub = inference_pb2_grpc.InferenceStub(channel)
            message = inference_pb2.ChatMessage(role="user", content="Tell me a story")
            req = inference_pb2.GenerateRequest(
                model=MODEL,
                chat=inference_pb2.Chat(messages=[message]),
                max_tokens=12,
                seed=3,
            )
            reply = stub.Generate(req, metadata=[("traceparent", tp3)], timeout=10)

        total = 4 * CHAT_SPANS + EMBED_SPANS + 1
        receiver.wait_for(total, timeout=10)
        time.sleep(1.2)  # one more export round: nothing else (no duplicate, no stray span)
        tree = Tree(receiver.spans())
        assert len(tree.spans) == total, [s.name for s in tree.spans]
        assert len(tree.roots) == 6
        assert all(s.trace_id != trace0 for s in tree.spans)  # not sampled
        sent = engine_traceparents(mock)
        assert len(sent) == 6

        # The incoming trace is continued: the request's span is the parent's child, and
        # the engine frame carries the same trace with the request's own span id.
        for trace, parent in ((trace1, parent1), (trace2, parent2), (trace3, parent3)):
            root = tree.root(trace)
            assert root.parent_span_id == parent
            tree.check(root)
            assert sent[trace] == f"00-{trace}-{root.span_id}-01"

        check_chat_attrs(
            tree.root(trace1),
            plain["id"],
            plain["usage"],
            plain["choices"][0]["finish_reason"],
            "http",
        )
        finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        check_chat_attrs(
            tree.root(trace2),
            chunks[0]["id"],
            chunks[-1]["usage"],
            next(f for f in finish if f),
            "http",
        )
        grpc_usage = {
            "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
        }
        finish3 = inference_pb2.FinishReason.Name(reply.finish_reason)
        check_chat_attrs(
            tree.root(trace3),
            reply.id,
            grpc_usage,
            finish3.removeprefix("FINISH_REASON_").lower(),
            "grpc",
        )

        # Without a traceparent: a new trace, a root span of its own.
        known = (trace1, trace2, trace3, trace4, trace5)
        new = [r for r in tree.roots if r.trace_id not in known]
        assert len(new) == 1
        root = new[0]
        assert root.parent_span_id == ""
        tree.check(root)
        check_chat_attrs(
            root,
            untraced["id"],
            untraced["usage"],
            untraced["choices"][0]["finish_reason"],
            "http",
        )
        # Its flags: sampled, and (W3C Trace Context level 2, the SDK's choice for a trace
        # id it drew at random) random: 03.
        assert sent[root.trace_id] == f"00-{root.trace_id}-{root.span_id}-03"

        # Not sampled: the engine gets the trace, flags 00, and a span id of this server's.
        tp = sent[trace0].split("-")
        assert tp[3] == "00" and tp[2] not in ("0" * 16, parent0)

        # Embeddings.
        root = tree.root(trace4)
        assert root.parent_span_id == parent4
        assert root.name == f"embeddings {EMBED_MODEL}"
        tree.check(root, chat=False)
        a = root.attributes
        assert a["gen_ai.operation.name"] == "embeddings"
        assert a["gen_ai.request.model"] == EMBED_MODEL
        assert a["gen_ai.usage.input_tokens"] == embedded["usage"]["prompt_tokens"] > 0
        assert a["gen_ai.response.id"].startswith("embd-")
        assert a["gen_ai.response.model"] == EMBED_MODEL
        assert sent[trace4] == f"00-{trace4}-{root.span_id}-01"

        # The failed request: its span alone (no phase ended), status ERROR, the error's
        # kind; no engine frame.
        root = tree.root(trace5)
        assert root.parent_span_id == parent5
        assert root.name == "chat no-such"
        assert root.status == "ERROR" and "no-such" in root.status_message
        assert root.attributes["error.type"] == "model_not_found"
        assert tree.children(root) == {}
        assert trace5 not in sent


def _requests(server: NeutrinoProc, n: int) -> list[float]:
    """``n`` sequential chat completions on one connection: each one's latency (s)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    out = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            status, raw = post(conn, "/v1/chat/completions", chat_body())
            out.append(time.perf_counter() - t0)
            assert status == 200, raw
    finally:
        conn.close()
    return out


def _terminate(server: NeutrinoProc) -> tuple[int, float]:
    """SIGTERM: the exit status and how long the exit took (s)."""
    proc = server.proc
    assert proc is not None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError("no exit 20 s after SIGTERM") from None
    return rc, time.monotonic() - t0


def test_collector_down_costs_nothing(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory()
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    traced = neutrino_factory(config=config(mock, down, shutdown_timeout_s=2.0))
    plain = neutrino_factory(config=config(mock))
    _requests(traced, 5)  # warm-up
    _requests(plain, 5)
    with_tracing = statistics.median(_requests(traced, 50))
    without = statistics.median(_requests(plain, 50))
    assert with_tracing < 2 * without + 0.020, (with_tracing, without)
    # Spans are queued for a collector that never answers: the shutdown waits at most
    # [tracing] shutdown_timeout_s for them.
    rc, took = _terminate(traced)
    assert rc == 0, traced.log()
    assert took < 8.0, (took, traced.log())
    assert f"tracing to {down}" in traced.log()  # it was on
