"""Cancellation, engine loss, timeouts and multiplexing, with real processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.support.procs import MockIE, NeutrinoProc, wait_for

MODEL = "qwen2.5-mock"
MSG: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Tell me a long story"}]


def body(**kw: Any) -> dict[str, Any]:
    b: dict[str, Any] = {"model": MODEL, "messages": MSG, "max_tokens": 400}
    b.update(kw)
    return b


def engine_config(mock: MockIE, extra: str = "", connections: int = 1) -> str:
    return f"""
[[engines]]
socket = "{mock.socket}"
connections = {connections}
[engine_link]
backoff_initial_s = 0.02
backoff_max_s = 0.2
{extra}
"""


def one_slot(
    tmp_path: Path,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    queue: int,
) -> tuple[MockIE, NeutrinoProc]:
    """An engine whose requests stall after one token, behind one in-flight slot and a
    queue of ``queue``."""
    script = tmp_path / "stall.json"
    script.write_text(json.dumps({"rules": [{"match": "*", "fault": "stall", "fault_after": 1}]}))
    mock = mock_factory("--script", str(script))
    limits = f"[limits]\nmax_inflight = 1\nmax_queue = {queue}"
    return mock, neutrino_factory(config=engine_config(mock, limits))


async def read_events(resp: aiohttp.ClientResponse, n: int) -> list[str]:
    got: list[str] = []
    async for line in resp.content:
        text = line.decode().strip()
        if text.startswith("data: "):
            got.append(text[6:])
            if len(got) >= n:
                break
    return got


async def test_client_disconnect_mid_stream_sends_one_cancel(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "300")
    server = neutrino_factory(config=engine_config(mock))
    async with aiohttp.ClientSession() as s:
        resp = await s.post(server.base_url + "/v1/chat/completions", json=body(stream=True))
        assert resp.status == 200
        assert len(await read_events(resp, 3)) == 3
        resp.close()  # the client goes away mid-stream
    cancels = mock.wait_event("cancel", 1)
    time.sleep(0.3)  # would a second cancel arrive?
    cancels = mock.events("cancel")
    assert len(cancels) == 1
    queries = mock.events("query")
    assert len(queries) == 1 and cancels[0]["request_id"] == queries[0]["request_id"]
    assert cancels[0]["reason"] == "client disconnected"
    assert wait_for(lambda: server.history(1)[0]["state"] == "cancelled")
    rec = server.history(1)[0]
    assert [t[0] for t in rec["transitions"]][-1] == "cancelled"


async def test_client_disconnect_non_stream_sends_one_cancel(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "300")
    server = neutrino_factory(config=engine_config(mock))
    payload = json.dumps(body()).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        assert mock.wait_event("query", 1)
        time.sleep(0.1)
    assert mock.wait_event("cancel", 1)
    time.sleep(0.3)
    assert len(mock.events("cancel")) == 1
    assert wait_for(lambda: server.history(1)[0]["state"] == "cancelled")


async def test_engine_killed_mid_stream_then_recovers(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "300")
    server = neutrino_factory(config=engine_config(mock, connections=2))
    async with aiohttp.ClientSession() as s:
        resp = await s.post(server.base_url + "/v1/chat/completions", json=body(stream=True))
        await read_events(resp, 3)
        mock.kill()
        t0 = time.monotonic()
        rest = await asyncio.wait_for(read_events(resp, 1000), 5)
        elapsed = time.monotonic() - t0
        assert rest[-1] == "[DONE]"
        err = json.loads(rest[-2])["error"]
        assert err["code"] == "engine_disconnected"
        assert elapsed < 1.0, elapsed
        # While the engine is gone: 503 with a clear error.
        r = await s.post(server.base_url + "/v1/chat/completions", json=body(max_tokens=5))
        assert r.status == 503
        assert (await r.json())["error"]["code"] in {"no_engine"}
        mock.start()  # the engine comes back on the same socket
        assert await asyncio.to_thread(wait_for, lambda: server.status_code() == 200, 10)
        r = await s.post(server.base_url + "/v1/chat/completions", json=body(max_tokens=5))
        assert r.status == 200
        assert (await r.json())["choices"][0]["message"]["content"]
    assert wait_for(lambda: any(h["state"] == "failed" for h in server.history(10)))


async def test_64_concurrent_streams_share_one_connection(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "1", "--capacity", "128")
    server = neutrino_factory(config=engine_config(mock, connections=1))
    client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)

    async def expected(seed: int) -> str:
        r = await client.chat.completions.create(
            model=MODEL,
            messages=MSG,
            max_tokens=32,
            seed=seed,
        )
        return r.choices[0].message.content or ""

    async def streamed(seed: int) -> str:
        text = ""
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=MSG,
            max_tokens=32,
            seed=seed,
            stream=True,
        )
        async for chunk in stream:
            for c in chunk.choices:
                text += c.delta.content or ""
        return text

    seeds = list(range(1000, 1064))
    want = [await expected(s) for s in seeds]
    assert len(set(want)) > 32  # the seeds really give different texts
    got = await asyncio.gather(*(streamed(s) for s in seeds))
    assert got == want
    conns = {e["conn"] for e in mock.events("query")}
    assert len(conns) == 1
    # Neutrino's hello accepts tokenBatch frames, so these streams came through them.
    assert all(e["token_batches"] for e in mock.events("hello"))
    await client.close()


async def test_timeout_gives_504_and_cancels(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    tmp_path: Path,
) -> None:
    script = tmp_path / "stall.json"
    script.write_text(json.dumps({"rules": [{"match": "*", "fault": "stall", "fault_after": 2}]}))
    mock = mock_factory("--script", str(script))
    server = neutrino_factory(config=engine_config(mock, "[limits]\nrequest_timeout_s = 0.5"))
    async with aiohttp.ClientSession() as s:
        t0 = time.monotonic()
        r = await s.post(server.base_url + "/v1/chat/completions", json=body(max_tokens=20))
        assert r.status == 504
        assert (await r.json())["error"]["code"] == "timeout"
        assert 0.4 < time.monotonic() - t0 < 3
        r = await s.post(
            server.base_url + "/v1/chat/completions", json=body(max_tokens=20, stream=True)
        )
        events = await read_events(r, 100)
        assert json.loads(events[-2])["error"]["code"] == "timeout" and events[-1] == "[DONE]"
    cancels = mock.wait_event("cancel", 2)
    assert [c["reason"] for c in cancels] == ["timeout", "timeout"]


async def test_sse_comment_at_once_and_keepalives(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--ttft-ms", "700", "--reply-tokens", "3")
    server = neutrino_factory(config=engine_config(mock, "[http]\nsse_keepalive_s = 0.1"))
    async with aiohttp.ClientSession() as s:
        t0 = time.monotonic()
        r = await s.post(server.base_url + "/v1/chat/completions", json=body(stream=True))
        first = await r.content.readline()
        assert first == b": ok\n" and time.monotonic() - t0 < 0.5
        raw = await r.read()
    assert raw.count(b": keepalive") >= 3
    assert raw.rstrip().endswith(b"data: [DONE]")


@pytest.mark.parametrize("fast_path", ["true", "false"])
async def test_keepalives_while_a_stream_waits_in_the_queue(
    fast_path: str,
    tmp_path: Path,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """A stream queued behind a stalled request gets its stream opened and keepalive
    comments while it waits (on the lean HTTP/1.1 server and on aiohttp), then its
    answer once the slot frees."""
    script = tmp_path / "stall.json"
    script.write_text(json.dumps({"rules": [{"match": "stall", "fault": "stall"}]}))
    mock = mock_factory("--script", str(script))
    extra = f"[limits]\nmax_inflight = 1\n[http]\nsse_keepalive_s = 0.1\nfast_path = {fast_path}"
    server = neutrino_factory(config=engine_config(mock, extra))
    stalled: Any = [{"role": "user", "content": "stall here"}]
    async with aiohttp.ClientSession() as s:
        url = server.base_url + "/v1/chat/completions"
        first = asyncio.ensure_future(s.post(url, json=body(messages=stalled, max_tokens=5)))
        await asyncio.to_thread(mock.wait_event, "query", 1)
        r = await s.post(url, json=body(max_tokens=3, stream=True))
        assert await r.content.readline() == b": ok\n"
        waited = b""
        while waited.count(b": keepalive") < 3:
            waited += await asyncio.wait_for(r.content.readline(), 2)
        assert b"data:" not in waited  # still queued
        first.cancel()  # the client leaves: its slot frees, the queued stream runs
        rest = await asyncio.wait_for(r.read(), 5)
    assert rest.rstrip().endswith(b"data: [DONE]") and b'"finish_reason":"length"' in rest
    assert [c["reason"] for c in mock.wait_event("cancel", 1)] == ["client disconnected"]


async def test_silent_engine_is_detected_by_heartbeats(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "300")
    server = neutrino_factory(
        # The extra lines land in [engine_link].
        config=engine_config(
            mock, "heartbeat_interval_s = 0.2\nheartbeat_timeout_s = 0.4", connections=1
        )
    )
    assert mock.proc is not None
    async with aiohttp.ClientSession() as s:
        resp = await s.post(server.base_url + "/v1/chat/completions", json=body(stream=True))
        await read_events(resp, 2)
        mock.proc.send_signal(signal.SIGSTOP)  # alive but silent: no tokens, no pongs
        try:
            t0 = time.monotonic()
            rest = await asyncio.wait_for(read_events(resp, 1000), 5)
            assert json.loads(rest[-2])["error"]["code"] == "engine_disconnected"
            assert time.monotonic() - t0 < 2.0
            assert server.status_code() == 503  # no engine while it stays frozen
            assert "showed no sign of life" in server.log()
        finally:
            mock.proc.send_signal(signal.SIGCONT)
        assert await asyncio.to_thread(wait_for, lambda: server.status_code() == 200, 10)


async def test_an_engine_whose_pongs_lag_behind_its_tokens_stays_connected(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    """A saturated engine answers pings late, behind the tokens it streams: those
    tokens are proof of life (before, only pongs were, and busy engines were dropped)."""
    mock = mock_factory("--itl-ms", "10", "--reply-tokens", "300", "--pong-delay-ms", "60000")
    server = neutrino_factory(
        config=engine_config(
            mock, "heartbeat_interval_s = 0.2\nheartbeat_timeout_s = 0.4", connections=1
        )
    )
    async with aiohttp.ClientSession() as s:
        resp = await s.post(
            server.base_url + "/v1/chat/completions", json=body(stream=True, max_tokens=300)
        )
        events = await asyncio.wait_for(read_events(resp, 1000), 15)  # ~3 s of tokens
    assert events[-1] == "[DONE]" and "error" not in events[-2]
    assert len(mock.events("ping")) >= 5  # pings went out all along
    # Silent before the query and once the stream is over, the engine is rightly dropped
    # 0.4 s later: only a drop while it streamed is a failure.
    (finished,) = mock.wait_event("finish", 1)
    (query,) = mock.events("query")
    assert not [e for e in mock.events("disconnect") if query["t"] < e["t"] < finished["t"]]


async def test_full_queue_is_a_429(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    tmp_path: Path,
) -> None:
    mock, server = one_slot(tmp_path, mock_factory, neutrino_factory, queue=1)
    async with aiohttp.ClientSession() as s:
        url = server.base_url + "/v1/chat/completions"
        first = asyncio.ensure_future(s.post(url, json=body(max_tokens=5)))
        await asyncio.to_thread(mock.wait_event, "query", 1)
        second = asyncio.ensure_future(s.post(url, json=body(max_tokens=5)))
        await asyncio.sleep(0.3)  # the second waits in the queue
        r = await s.post(url, json=body(max_tokens=5))
        assert r.status == 429 and r.headers["Retry-After"] == "1"
        err = (await r.json())["error"]
        assert err["code"] == "queue_full" and err["type"] == "rate_limit_error"
        state = server.get_json("/neutrino/v1/app_state")
        assert state["queue_depth"] == 1 and state["in_flight"] == 1
        first.cancel()
        second.cancel()


def test_undecodable_engine_output_fails_that_request_alone(
    tmp_path: Path,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """An engine that sends a token id outside the vocabulary: that request ends with a 502
    engine_error (a stream with an error event), the engine gets one cancel for it, and the
    other requests on the same connection go on; the connection is not dropped."""
    script = tmp_path / "bad-id.json"
    script.write_text(
        json.dumps({"rules": [{"match": "badid", "reply_tokens": [9707, 2**31, 11]}]})
    )
    mock = mock_factory("--itl-ms", "10", "--reply-tokens", "40", "--script", str(script))
    server = neutrino_factory(config=engine_config(mock))
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    bad: Any = [{"role": "user", "content": "badid"}]
    # A long stream runs beside the bad requests, on the same (only) engine connection.
    other = client.chat.completions.create(model=MODEL, messages=MSG, max_tokens=40, stream=True)
    first = next(iter(other))
    try:
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=10)
    except openai.APIStatusError as exc:
        assert exc.status_code == 502
        assert exc.body == {
            "message": "the engine's output cannot be decoded: token id 2147483648 is not in "
            "the vocabulary",
            "type": "server_error",
            "param": None,
            "code": "engine_error",
        }
    else:
        raise AssertionError("a 502 was expected")
    with pytest.raises(openai.APIError, match="cannot be decoded"):
        for _ in client.chat.completions.create(
            model=MODEL, messages=bad, max_tokens=10, stream=True
        ):
            pass
    rest = list(other)
    assert [first, *rest][-1].choices[0].finish_reason == "length"
    assert sum(1 for c in [first, *rest] if c.choices and c.choices[0].delta.content) == 40
    queries = mock.events("query")
    bad_ids = {q["request_id"] for q in queries[1:]}
    assert len(queries) == 3 and len(bad_ids) == 2
    mock.wait_event("cancel", 2)
    time.sleep(0.2)  # would another cancel arrive?
    assert sorted(c["request_id"] for c in mock.events("cancel")) == sorted(bad_ids)
    assert len(mock.events("connect")) == 1  # never reconnected
    states = [h["state"] for h in server.history(3)]
    assert sorted(states) == ["complete", "failed", "failed"]


def test_engine_error_messages_reach_clients_only_when_they_blame_the_request(
    tmp_path: Path,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """An engine's internal error (here a message with a path and a trace) reaches the
    client as a fixed text, in the body and in the stream's error event, and lands in
    Neutrino's log; a context-length error passes the engine's first line on."""
    secret = "boom at /opt/engine/secret.py line 3\nTraceback (most recent call last):"
    rules = [
        {"match": "crash", "fault": "error", "error_code": "internal", "error_message": secret},
        {
            "match": "huge",
            "fault": "error",
            "error_code": "context_length",
            "error_message": "prompt has 9000 tokens\nlimit is 8192",
        },
    ]
    script = tmp_path / "errors.json"
    script.write_text(json.dumps({"rules": rules}))
    mock = mock_factory("--script", str(script))
    server = neutrino_factory(config=engine_config(mock))
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)

    def ask(text: str) -> openai.APIStatusError:
        msgs: Any = [{"role": "user", "content": text}]
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5)
        return info.value

    crash = ask("crash")
    assert crash.status_code == 502
    assert crash.body == {
        "message": "the engine failed to process the request",
        "type": "server_error",
        "param": None,
        "code": "engine_error",
    }
    huge = ask("huge")
    assert huge.status_code == 400
    assert isinstance(huge.body, dict)
    assert huge.body["message"] == "engine error: prompt has 9000 tokens"
    assert huge.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.APIError) as streamed:
        msgs: Any = [{"role": "user", "content": "crash"}]
        for _ in client.chat.completions.create(
            model=MODEL, messages=msgs, max_tokens=5, stream=True
        ):
            pass
    assert streamed.value.message == "the engine failed to process the request"
    assert wait_for(lambda: "/opt/engine/secret.py" in server.log())


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "plain"])
async def test_a_client_that_leaves_while_queued_never_reaches_the_engine(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    tmp_path: Path,
    stream: bool,
) -> None:
    mock, server = one_slot(tmp_path, mock_factory, neutrino_factory, queue=4)
    url = server.base_url + "/v1/chat/completions"
    async with aiohttp.ClientSession() as s:
        first = await s.post(url, json=body(stream=True))  # holds the only slot
        await asyncio.to_thread(mock.wait_event, "query", 1)
        waiting = asyncio.ensure_future(s.post(url, json=body(stream=stream)))
        assert await asyncio.to_thread(
            wait_for, lambda: server.get_json("/neutrino/v1/app_state")["queue_depth"] == 1
        )
        if stream:  # a queued stream opens at once (keepalive comments while it waits)
            resp = await waiting
            assert resp.status == 200
            resp.close()  # the client gives up while queued
        else:
            waiting.cancel()  # the client gives up while queued
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        assert await asyncio.to_thread(
            wait_for, lambda: server.get_json("/neutrino/v1/app_state")["queue_depth"] == 0
        )
        first.close()  # the slot frees: the one who left must not take it
        await asyncio.to_thread(mock.wait_event, "cancel", 1)
        await asyncio.sleep(0.3)
    assert len(mock.events("query")) == 1
    assert len(mock.events("cancel")) == 1
    states = [r["state"] for r in server.history(2)]
    assert states == ["cancelled", "cancelled"]
