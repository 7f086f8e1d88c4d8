"""The upstreams' HTTP/1.1 client (``engine/upstream/http1.py``) against real servers on
real sockets: small asyncio servers that answer as servers do (a length, chunks, a body
that ends with the connection, a close after each answer, an idle close, garbage), and
see what the client sends and when it leaves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from neutrino.engine.upstream.http1 import HIGH_WATER, HTTP1Pool, UpstreamHTTPError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """An asyncio TCP server running ``handler`` per connection, counting connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(r, w)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                w.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def read_request(self, r: asyncio.StreamReader) -> bytes:
        head = await r.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await r.readexactly(length)
        self.requests.append(head + body)
        return body


def _pool(url: str, **kw: Any) -> HTTP1Pool:
    kw.setdefault("limit", 4)
    return HTTP1Pool(
        url, connect_timeout=2.0, headers={"Content-Type": "application/json", "X-Key": "k"}, **kw
    )


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 10))


def test_a_request_is_sent_whole_and_its_connection_kept() -> None:
    async def main() -> None:
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while True:
                body = await srv.read_request(r)
                w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                        b"\r\n%s" % (len(body), body))  # fmt: skip

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            for i in range(3):
                resp = await pool.request("POST", "/v1/echo", b"hello %d" % i, "00-ab-cd-01")
                assert resp.status == 200 and resp.content_type == "text/plain"
                assert await resp.read(100) == b"hello %d" % i
                resp.close()
            assert srv.connections == 1  # one kept-alive connection carried all three
            first = srv.requests[0]
            assert first.startswith(b"POST /v1/echo HTTP/1.1\r\nHost: 127.0.0.1:")
            assert b"\r\nX-Key: k\r\n" in first and b"\r\ntraceparent: 00-ab-cd-01\r\n" in first
            assert first.endswith(b"Content-Length: 7\r\n\r\nhello 0")
            await pool.close()

    run(main())


def test_chunks_are_read_as_they_come_and_a_header_with_a_line_break_is_not_sent() -> None:
    async def main() -> None:
        go = asyncio.Event()
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n5\r\ndata1\r\n")  # fmt: skip
            await go.wait()
            w.write(b"5\r\ndata2\r\n0\r\n\r\n")
            await w.drain()
            await r.read()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            resp = await pool.request("POST", "/s", b"{}", "bad\r\nX-Injected: 1")
            got = []
            async for chunk in resp.chunks():
                got.append(chunk)
                go.set()
            assert got == [b"data1", b"data2"] and resp.complete
            assert b"X-Injected" not in srv.requests[0]
            resp.close()
            await pool.close()

    run(main())


def test_a_body_that_ends_with_the_connection_and_connection_close() -> None:
    async def main() -> None:
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
            await w.drain()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            for _ in range(2):
                resp = await pool.request("GET", "/x")
                assert await resp.read(1000) == b"until the end"
                resp.close()
            assert srv.connections == 2  # the server closed each: none was reused
            assert pool.open_connections == 0
            await pool.close()

    run(main())


def test_a_reused_connection_the_server_closed_is_retried_on_a_new_one() -> None:
    async def main() -> None:
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await w.drain()
            await r.read(1)  # the next request's first byte: close without answering

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            for _ in range(2):
                resp = await pool.request("POST", "/x", b"{}")
                assert await resp.read(10) == b"ok"
                resp.close()
            assert srv.connections == 2
            await pool.close()

    run(main())


def test_a_connection_that_breaks_mid_body_is_an_error() -> None:
    async def main() -> None:
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            await w.drain()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            resp = await pool.request("POST", "/x", b"{}")
            with pytest.raises(UpstreamHTTPError, match="closed the connection"):
                async for _ in resp.chunks():
                    pass
            resp.close()
            assert pool.open_connections == 0
            await pool.close()

    run(main())


@pytest.mark.parametrize("answer", [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nX: y\r\n" * 200])
def test_what_is_not_http_is_an_error(answer: bytes) -> None:
    async def main() -> None:
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(answer)
            await w.drain()
            await r.read()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            with pytest.raises(UpstreamHTTPError):
                await pool.request("POST", "/x", b"{}")
            assert pool.open_connections == 0
            await pool.close()

    run(main())


def test_a_closed_response_that_was_not_read_to_its_end_closes_its_connection() -> None:
    async def main() -> None:
        left = asyncio.Event()
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
            await w.drain()
            assert await r.read() == b""  # the client left
            left.set()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            resp = await pool.request("POST", "/x", b"{}")
            async for _ in resp.chunks():
                break
            resp.close()
            await asyncio.wait_for(left.wait(), 5)
            assert pool.open_connections == 0
            await pool.close()

    run(main())


def test_reading_pauses_while_the_reader_is_behind() -> None:
    async def main() -> None:
        srv: Server
        sent = 0

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal sent
            await srv.read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            piece = b"x" * 65536
            for _ in range(200):  # 13 MB, far past the client's buffer and the kernel's
                w.write(b"10000\r\n" + piece + b"\r\n")
                await w.drain()
                sent += 1
            w.write(b"0\r\n\r\n")
            await w.drain()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            resp = await pool.request("POST", "/x", b"{}")
            chunks = resp.chunks()
            first = await anext(chunks)
            await asyncio.sleep(0.5)  # the reader stalls: the server is held back
            assert sent < 150
            total = len(first)
            async for chunk in chunks:
                assert len(chunk) <= HIGH_WATER + 262144  # the mark, and one read past it
                total += len(chunk)
            assert total == 200 * 65536 and sent == 200
            resp.close()
            await pool.close()

    run(main())


def test_the_limit_makes_requests_wait_for_a_connection() -> None:
    async def main() -> None:
        srv: Server
        busy = 0
        peak = 0

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal busy, peak
            while True:
                await srv.read_request(r)
                busy += 1
                peak = max(peak, busy)
                await asyncio.sleep(0.02)
                busy -= 1
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        async with Server(handler) as srv:
            pool = _pool(srv.url, limit=2)

            async def one() -> bytes:
                resp = await pool.request("POST", "/x", b"{}")
                try:
                    return await resp.read(10)
                finally:
                    resp.close()

            assert await asyncio.gather(*(one() for _ in range(8))) == [b"ok"] * 8
            assert peak == 2 and srv.connections == 2
            await pool.close()

    run(main())


def test_a_refused_connection_is_an_os_error_and_frees_its_place() -> None:
    async def main() -> None:
        async with Server(lambda r, w: asyncio.sleep(0)) as srv:
            url = srv.url
        pool = _pool(url, limit=1)
        for _ in range(2):
            with pytest.raises(OSError):
                await pool.request("POST", "/x", b"{}")
        assert pool.open_connections == 0
        await pool.close()

    run(main())


def test_a_cancelled_request_closes_its_connection() -> None:
    async def main() -> None:
        left = asyncio.Event()
        srv: Server

        async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await srv.read_request(r)
            assert await r.read() == b""  # never answered: the client leaves
            left.set()

        async with Server(handler) as srv:
            pool = _pool(srv.url)
            task = asyncio.ensure_future(pool.request("POST", "/x", b"{}"))
            await asyncio.sleep(0.1)
            task.cancel()
            await asyncio.wait_for(left.wait(), 5)
            assert pool.open_connections == 0
            await pool.close()

    run(main())


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        _pool("unix:///tmp/x")
