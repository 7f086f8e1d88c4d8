"""The loadgen's HTTP/3 client when its connect is given up (a connect timeout against
an address where nothing answers)."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest

from neutrino.loadgen.h3 import H3Client


def _silent_udp_port() -> socket.socket:
    """A bound UDP socket that never answers (kept open so that no ICMP error comes)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


async def test_a_cancelled_connect_leaves_no_unretrieved_exception() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    silent = _silent_udp_port()
    try:
        client = H3Client("127.0.0.1", silent.getsockname()[1])
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await client.__aenter__()
        await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        silent.close()
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in seen] == []
