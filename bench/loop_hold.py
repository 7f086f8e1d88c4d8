"""The loop-hold probe: hostile and large requests against a live Neutrino, each while a
watcher process asks ``/neutrino/v1/status`` every 20 ms; a request's figure is the
slowest answer the watcher got while it ran (how long the event loop was held).

``make bench`` prints the table; ``tests/reliability/test_loop_budget.py`` runs the same
cases and asserts their answers (never their times). Run alone:
``python -m bench.loop_hold`` (starts a server from this checkout) or
``python -m bench.loop_hold --repo DIR`` (a server from another checkout: a before/after).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

REPO = Path(__file__).resolve().parents[1]
PING_S = 0.02
CHAT_MODEL = "qwen2.5-mock"
VISION_MODEL = "qwen2.5-vl-mock"
LONG_MODEL = "llama3.2-mock"  # a context of 131,072 tokens


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    grpc: str  # HOST:PORT

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass
class Outcome:
    """What a case got: an HTTP status (or a gRPC code name) and the error's param."""

    status: int | str
    param: str | None = None
    detail: str = ""


Case = Callable[[Target, aiohttp.ClientSession], Awaitable[Outcome]]


# ---------------------------------------------------------------- the watcher


class Watcher:
    """A child process that pings ``/neutrino/v1/status`` every 20 ms over one
    keep-alive connection and reports each ping's send time and latency."""

    def __init__(self, target: Target) -> None:
        self.samples: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.loop_hold", "--watch", f"{target.host}:{target.port}"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 30
        while not self.samples:  # pinging before the first case starts
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("the watcher got no answer from the server")
            time.sleep(0.01)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            sent, latency = line.split()
            with self._lock:
                self.samples.append((float(sent), float(latency)))

    def worst(self, start: float, end: float) -> float:
        """The slowest ping (seconds) sent from just before ``start`` to ``end``; waits
        for the pings of that window to come back."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self._lock:
                if self.samples and self.samples[-1][0] > end:
                    break
            time.sleep(0.01)
        with self._lock:
            window = [lat for sent, lat in self.samples if start - PING_S <= sent <= end]
        return max(window, default=float("nan"))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def watch(address: str) -> None:
    """The watcher's own loop (``--watch HOST:PORT``): one line per ping."""
    host, _, port = address.rpartition(":")
    with contextlib.suppress(OSError):  # ahead of the clients and engine (root only)
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = f"GET /neutrino/v1/status HTTP/1.1\r\nHost: {address}\r\n\r\n".encode()
    buf = b""
    next_at = time.monotonic()
    while True:
        sent = time.monotonic()
        sock.sendall(request)
        while True:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if sep:
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    buf = rest[length:]
                    break
            data = sock.recv(65536)
            if not data:
                return
            buf += data
        print(f"{sent:.6f} {time.monotonic() - sent:.6f}", flush=True)
        next_at = max(next_at + PING_S, time.monotonic())
        time.sleep(max(0.0, next_at - time.monotonic()))


# ---------------------------------------------------------------- helpers


def _chat(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": CHAT_MODEL,
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 4,
    }
    body.update(extra)
    return body


async def _post(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes | dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    async with session.post(url, data=data, headers=hdrs) as resp:
        return resp.status, await resp.read()


def _error_outcome(status: int, raw: bytes) -> Outcome:
    try:
        err = orjson.loads(raw).get("error") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return Outcome(status, None, raw[:200].decode(errors="replace"))
    return Outcome(status, err.get("param"), str(err.get("message", ""))[:200])


async def _chat_case(t: Target, s: aiohttp.ClientSession, body: bytes | dict[str, Any]) -> Outcome:
    status, raw = await _post(s, t.base + "/v1/chat/completions", body)
    if status != 200:
        return _error_outcome(status, raw)
    return Outcome(status, None, f"{len(raw)} bytes")


async def _raw(t: Target, data: bytes, read_timeout: float = 5.0) -> bytes:
    """Send raw bytes on a new connection; what comes back until the server closes or
    ``read_timeout`` passes without a byte."""
    reader, writer = await asyncio.open_connection(t.host, t.port)
    try:
        writer.write(data)
        await writer.drain()
        got = b""
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), read_timeout)
            except TimeoutError:
                return got
            if not chunk:
                return got
            got += chunk
    finally:
        writer.close()


def _first_status(raw: bytes) -> Outcome:
    if not raw.startswith(b"HTTP/1."):
        return Outcome(0, None, "no answer")
    return Outcome(int(raw.split(b" ", 2)[1]), None, raw.split(b"\r\n", 1)[0].decode())


# ---------------------------------------------------------------- the cases

BIG_LOGPROBS: dict[str, Any] = {
    "n": 8,
    "logprobs": True,
    "top_logprobs": 20,
    "max_tokens": 4000,
    "ignore_eos": True,
    "seed": 7,
}


async def big_logprobs(t: Target, s: aiohttp.ClientSession) -> Outcome:
    status, raw = await _post(s, t.base + "/v1/chat/completions", _chat(**BIG_LOGPROBS))
    if status != 200:
        return _error_outcome(status, raw)
    body = orjson.loads(raw)
    tokens = [len(c["logprobs"]["content"]) for c in body["choices"]]
    tops = {len(e["top_logprobs"]) for c in body["choices"] for e in c["logprobs"]["content"]}
    return Outcome(status, None, f"{len(raw)} bytes, tokens {set(tokens)}, tops {tops}")


async def big_logprobs_stream(t: Target, s: aiohttp.ClientSession) -> Outcome:
    body = orjson.dumps(_chat(stream=True, **BIG_LOGPROBS))
    headers = {"Content-Type": "application/json"}
    entries = 0
    async with s.post(t.base + "/v1/chat/completions", data=body, headers=headers) as resp:
        if resp.status != 200:
            return _error_outcome(resp.status, await resp.read())
        async for line in resp.content:  # counted, not parsed: the client stays light
            entries += line.count(b'"top_logprobs":[')
    return Outcome(200, None, f"{entries} logprob entries")


async def big_logprobs_grpc(t: Target, s: aiohttp.ClientSession) -> Outcome:
    import grpc

    from neutrino.v1 import inference_pb2, inference_pb2_grpc

    req = inference_pb2.GenerateRequest(
        model=CHAT_MODEL,
        chat=inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content="hi")]),
        n=8,
        logprobs=True,
        top_logprobs=20,
        max_tokens=4000,
        ignore_eos=True,
        seed=7,
    )
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(t.grpc, options=options) as ch:
        try:
            resp = await inference_pb2_grpc.InferenceStub(ch).Generate(req, timeout=120)
        except grpc.aio.AioRpcError as exc:
            return Outcome(exc.code().name, None, str(exc.details())[:200])
    return Outcome(200, None, f"{len(resp.choices)} choices, {resp.ByteSize()} bytes")


async def empty_messages_grpc(t: Target, s: aiohttp.ClientSession) -> Outcome:
    import grpc

    from neutrino.v1 import inference_pb2, inference_pb2_grpc

    msgs = [inference_pb2.ChatMessage(role="user", content="")] * 100_000
    req = inference_pb2.GenerateRequest(model=CHAT_MODEL, chat=inference_pb2.Chat(messages=msgs))
    async with grpc.aio.insecure_channel(t.grpc) as ch:
        try:
            await inference_pb2_grpc.InferenceStub(ch).Generate(req, timeout=60)
        except grpc.aio.AioRpcError as exc:
            return Outcome(exc.code().name, None, str(exc.details())[:200])
    return Outcome("OK")


async def grpc_burst(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """2,000 unary calls at once on one channel: each served (or refused by the queue)."""
    import grpc

    from neutrino.v1 import inference_pb2, inference_pb2_grpc

    msg = inference_pb2.ChatMessage(role="user", content="hi")
    req = inference_pb2.GenerateRequest(
        model=CHAT_MODEL, chat=inference_pb2.Chat(messages=[msg]), max_tokens=4
    )
    async with grpc.aio.insecure_channel(t.grpc) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)

        async def one() -> str:
            try:
                await stub.Generate(req, timeout=120)
                return "OK"
            except grpc.aio.AioRpcError as exc:
                return str(exc.code().name)

        codes = await asyncio.gather(*(one() for _ in range(2000)))
    bad = sorted({c for c in codes if c not in ("OK", "RESOURCE_EXHAUSTED")})
    return Outcome(bad[0] if bad else "OK", None, f"{codes.count('OK')} of 2,000 served")


async def one_huge_message(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """One message of 7 MB to a model of 131,072 tokens: templated, then refused."""
    msgs = [{"role": "user", "content": "lorem ipsum dolor " * 400_000}]
    return await _chat_case(t, s, orjson.dumps(_chat(model=LONG_MODEL, messages=msgs)))


async def empty_messages(t: Target, s: aiohttp.ClientSession) -> Outcome:
    msgs = [{"role": "user", "content": ""}] * 100_000
    return await _chat_case(t, s, orjson.dumps(_chat(messages=msgs)))


async def many_tools(t: Target, s: aiohttp.ClientSession) -> Outcome:
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "does a thing",
                "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
        }
        for i in range(10_000)
    ]
    return await _chat_case(t, s, orjson.dumps(_chat(tools=tools)))


async def deep_schema(t: Target, s: aiohttp.ClientSession) -> Outcome:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        schema = {"type": "object", "properties": {"a": schema}}
    fmt = {"type": "json_schema", "json_schema": {"name": "deep", "schema": schema}}
    body = json.dumps(_chat(response_format=fmt)).encode()  # deeper than orjson writes
    return await _chat_case(t, s, body)


async def wide_schema(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """A 50 KB JSON schema (300 objects): checked against the metaschema, in Python."""
    item = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["a"],
    }
    schema = {"type": "object", "properties": {f"field_{i}": item for i in range(300)}}
    fmt = {"type": "json_schema", "json_schema": {"name": "wide", "schema": schema}}
    return await _chat_case(t, s, _chat(response_format=fmt))


async def huge_logit_bias(t: Target, s: aiohttp.ClientSession) -> Outcome:
    bias = {str(i * 7): 1 for i in range(200_000)}
    return await _chat_case(t, s, orjson.dumps(_chat(logit_bias=bias)))


async def admin_csrf(t: Target, s: aiohttp.ClientSession) -> Outcome:
    headers = {"Content-Type": "text/plain", "Origin": "http://evil.example"}
    async with s.post(t.base + "/neutrino/v1/reload", data=b"{}", headers=headers) as resp:
        return _error_outcome(resp.status, await resp.read())


async def dense_json(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """An 8 MB body of empty objects: the most JSON values a body of the size limit holds."""
    head = b'{"model": "qwen2.5-mock", "messages": ['
    count = (8 * 1024 * 1024 - len(head) - 64) // 3
    return await _chat_case(t, s, head + b",".join([b"{}"] * count) + b"]}")


async def long_prompt(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """A completion prompt of 120,000 characters (under the context): tokenized whole."""
    words = " ".join(f"word{i % 997}" for i in range(15_000))[:120_000]
    body = {"model": LONG_MODEL, "prompt": words, "max_tokens": 4}
    return await _chat_completion(t, s, body)


async def over_context(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """A 7 MB prompt, far over the context."""
    body = {"model": CHAT_MODEL, "prompt": "lorem ipsum dolor " * 400_000, "max_tokens": 4}
    return await _chat_completion(t, s, body)


async def _chat_completion(t: Target, s: aiohttp.ClientSession, body: dict[str, Any]) -> Outcome:
    status, raw = await _post(s, t.base + "/v1/completions", body)
    if status != 200:
        return _error_outcome(status, raw)
    return Outcome(status, None, f"{len(raw)} bytes")


async def long_chat(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """A chat of 2,000 messages of 50 characters: templated and tokenized whole."""
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 40}
        for i in range(2_000)
    ]
    return await _chat_case(t, s, _chat(model=LONG_MODEL, messages=msgs))


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    crc = struct.pack(">I", zlib.crc32(chunk))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + crc


async def png_bomb(t: Target, s: aiohttp.ClientSession) -> Outcome:
    import base64

    url = "data:image/png;base64," + base64.b64encode(_png(100_000, 100_000)).decode()
    content = [{"type": "text", "text": "what"}, {"type": "image_url", "image_url": {"url": url}}]
    body = _chat(model=VISION_MODEL, messages=[{"role": "user", "content": content}])
    return await _chat_case(t, s, body)


async def template_syntax(t: Target, s: aiohttp.ClientSession) -> Outcome:
    content = "{{ 7 * 7 }} {% for x in range(10**9) %}{{ x }}{% endfor %} {{ self }}"
    return await _chat_case(t, s, _chat(messages=[{"role": "user", "content": content}]))


async def deep_json(t: Target, s: aiohttp.ClientSession) -> Outcome:
    return await _chat_case(t, s, b"[" * 100_000 + b"]" * 100_000)


async def invalid_json(t: Target, s: aiohttp.ClientSession) -> Outcome:
    return await _chat_case(t, s, b'{"model": "qwen2.5-mock", "messages": [' + b"1," * 1_000_000)


async def huge_number(t: Target, s: aiohttp.ClientSession) -> Outcome:
    body = b'{"model": "qwen2.5-mock", "messages": [], "max_tokens": 1' + b"0" * 100_000 + b"}"
    return await _chat_case(t, s, body)


async def header_flood(t: Target, s: aiohttp.ClientSession) -> Outcome:
    flood = b"GET /health HTTP/1.1\r\n" + b"X-A: b\r\n" * 5000 + b"\r\n"
    return _first_status(await _raw(t, flood))


async def smuggling(t: Target, s: aiohttp.ClientSession) -> Outcome:
    raw = (
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 4\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /neutrino/v1/app_state HTTP/1.1\r\n\r\n"
    )
    return _first_status(await _raw(t, raw))


async def bad_chunk(t: Target, s: aiohttp.ClientSession) -> Outcome:
    raw = (
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n{}\r\n0\r\n\r\n"
    )
    return _first_status(await _raw(t, raw))


async def pipelined(t: Target, s: aiohttp.ClientSession) -> Outcome:
    raw = await _raw(t, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 1000, read_timeout=2.0)
    answered = raw.count(b"HTTP/1.1 200")
    return Outcome(200 if answered == 1000 else 0, None, f"{answered} answered")


async def path_traversal(t: Target, s: aiohttp.ClientSession) -> Outcome:
    raw = await _raw(t, b"GET /../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", read_timeout=1.0)
    if b"root:" in raw:
        return Outcome(200, None, "served a file")
    return _first_status(raw)


async def big_upload(t: Target, s: aiohttp.ClientSession) -> Outcome:
    """A 7 MB WAV for transcription: a large multipart body."""
    rate, seconds = 16_000, 220
    pcm = bytes(2 * rate * seconds)
    wav = (
        b"RIFF"
        + struct.pack("<I", 36 + len(pcm))
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, 2 * rate, 2, 16)
        + b"data"
        + struct.pack("<I", len(pcm))
        + pcm
    )
    form = aiohttp.FormData()
    form.add_field("model", "whisper-mock")
    form.add_field("file", wav, filename="a.wav", content_type="audio/wav")
    async with s.post(t.base + "/v1/audio/transcriptions", data=form) as resp:
        raw = await resp.read()
        if resp.status != 200:
            return _error_outcome(resp.status, raw)
        return Outcome(200, None, f"{len(raw)} bytes")


def idle_connections(count: int) -> Case:
    async def case(t: Target, s: aiohttp.ClientSession) -> Outcome:
        conns = []
        try:
            for _ in range(count):
                conns.append(await asyncio.open_connection(t.host, t.port))
            async with s.get(t.base + "/health") as resp:
                return Outcome(resp.status, None, f"{len(conns)} connections open")
        finally:
            for _, w in conns:
                w.close()

    return case


# name -> (case, expected status, expected param). The first rows are the issue's.
CASES: dict[str, tuple[Case, int | str, str | None]] = {
    "n=8 top_logprobs=20 4000 tokens": (big_logprobs, 200, None),
    "  the same, streamed": (big_logprobs_stream, 200, None),
    "  the same, over gRPC": (big_logprobs_grpc, 200, None),
    "100,000 empty messages": (empty_messages, 400, "messages"),
    "  100,000 messages over gRPC": (empty_messages_grpc, "INVALID_ARGUMENT", None),
    "2,000 unary gRPC calls at once": (grpc_burst, "OK", None),
    "10,000 tools": (many_tools, 400, "tools"),
    "json_schema 400 deep": (deep_schema, 400, "response_format.json_schema.schema"),
    "json_schema of 50 KB": (wide_schema, 200, None),
    "logit_bias 200,000 entries": (huge_logit_bias, 400, "logit_bias"),
    "8 MB of empty JSON objects": (dense_json, 400, "messages"),
    "120,000-character prompt": (long_prompt, 200, None),
    "7 MB prompt over the context": (over_context, 400, "prompt"),
    "one 7 MB message, 131k context": (one_huge_message, 400, "messages"),
    "chat of 2,000 messages": (long_chat, 200, None),
    "7 MB WAV upload": (big_upload, 200, None),
    "deep JSON": (deep_json, 400, None),
    "invalid JSON, 2 MB": (invalid_json, 400, None),
    "huge number": (huge_number, 400, None),
    "header flood": (header_flood, 400, None),
    "Content-Length with chunked": (smuggling, 400, None),
    "bad chunk size": (bad_chunk, 400, None),
    "1,000 pipelined requests": (pipelined, 200, None),
    "PNG claiming 100,000 x 100,000": (png_bomb, 400, None),
    "template syntax in content": (template_syntax, 200, None),
    "path traversal": (path_traversal, 404, None),
    "admin reload, text/plain, foreign Origin": (admin_csrf, 403, None),
}


async def run_case(case: Case, target: Target, watcher: Watcher) -> tuple[Outcome, float, float]:
    """Run one case; its outcome, the worst ping (s) while it ran, and its duration."""
    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        await asyncio.sleep(0.1)
        start = time.monotonic()
        try:
            outcome = await case(target, session)
        except (aiohttp.ClientError, OSError) as exc:
            outcome = Outcome(0, None, f"{type(exc).__name__}: {exc}")
        end = time.monotonic()
    return outcome, watcher.worst(start, end), end - start


# ---------------------------------------------------------------- bench


def start_server(repo: Path, port: int, grpc_port: int) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "neutrino",
        "--http-address",
        f"127.0.0.1:{port}",
        "--grpc-address",
        f"127.0.0.1:{grpc_port}",
        "--quic-address",
        "",
        "--metrics-address",
        "",
        "--log-level",
        "error",
    ]
    return subprocess.Popen(argv, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_ready(target: Target, timeout: float = 60) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            # Healthy: every model's text assets are loaded (meanwhile the loading
            # threads would share the interpreter with the first cases).
            with urllib.request.urlopen(target.base + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError("the server did not come up")


def measure(repo: Path = REPO, idle: int = 10_000) -> list[dict[str, Any]]:
    """Every case against a fresh server from ``repo``: rows of name, answer, worst ping.
    The server gets a core of its own; its embedded engine, this client and the watcher
    share the other (as ``make bench`` places them)."""
    from bench.run import OTHER_CPUS, SERVER_CPU, free_port, pin

    target = Target("127.0.0.1", free_port(), f"127.0.0.1:{free_port()}")
    mine = os.sched_getaffinity(0)
    proc = start_server(repo, target.port, int(target.grpc.rpartition(":")[2]))
    try:
        pin(proc.pid, SERVER_CPU)
        pin(0, OTHER_CPUS)
        _wait_ready(target)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        for child in children:  # the embedded mock_ie
            with contextlib.suppress(OSError):
                pin(int(child), OTHER_CPUS)
        return measure_target(target, idle)
    finally:
        proc.terminate()
        proc.wait(20)
        pin(0, mine)


def measure_target(target: Target, idle: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    watcher = Watcher(target)
    try:
        cases = dict(CASES)
        cases[f"{idle:,} idle connections"] = (idle_connections(idle), 200, None)
        for name, (case, _, _) in cases.items():
            outcome, worst, took = asyncio.run(run_case(case, target, watcher))
            row = {"case": name, "status": outcome.status, "param": outcome.param}
            rows.append(row | {"detail": outcome.detail, "worst_ms": 1000 * worst, "took_s": took})
    finally:
        watcher.close()
    return rows


def print_table(rows: list[dict[str, Any]], before: list[dict[str, Any]] | None = None) -> None:
    """The loop-hold table; ``before``: the same cases against another checkout."""
    print("\nLoop hold: the slowest answer to a 20 ms status ping while each request ran")
    was = {r["case"]: r for r in before or ()}
    head = f"  {'case':40} {'answer':>28} {'took':>7} {'worst ping':>11}"
    print(head + (f"   {'before: answer, worst':>28}" if before else ""))
    for r in rows:
        answer = f"{r['status']}" + (f" {r['param']}" if r["param"] else "")
        line = f"  {r['case']:40} {answer:>28} {r['took_s']:6.2f}s {r['worst_ms']:9.1f}ms"
        old = was.get(r["case"])
        if old is not None:
            then = f"{old['status']}" + (f" {old['param']}" if old["param"] else "")
            line += f"   {then:>19} {old['worst_ms']:7.1f}ms"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--watch", help=argparse.SUPPRESS)
    ap.add_argument("--repo", type=Path, default=REPO, help="checkout to start the server from")
    ap.add_argument("--target", help="HOST:PORT,GRPC_HOST:PORT of a running server")
    ap.add_argument("--before", type=Path, help="another checkout, for a before column")
    ap.add_argument("--idle", type=int, default=10_000, help="idle connections to open")
    ap.add_argument("--details", action="store_true", help="print each answer's detail")
    args = ap.parse_args()
    if args.watch:
        watch(args.watch)
        return
    before = None
    if args.target:
        http, grpc_address = args.target.split(",")
        host, _, port = http.rpartition(":")
        rows = measure_target(Target(host, int(port), grpc_address), args.idle)
    else:
        rows = measure(args.repo, args.idle)
        if args.before:
            before = measure(args.before, args.idle)
    print_table(rows, before)
    if args.details:
        for r in rows:
            print(f"  {r['case']}: {r['detail']}")


if __name__ == "__main__":
    main()
