"""Aborting a client connection so that nothing of it stays behind."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset


def reset(t: asyncio.Transport) -> None:
    """Abort a connection with a TCP reset: the kernel drops what it still holds for the
    peer at once (a plain close would leave its send buffer, up to megabytes, queued for
    a client that never reads, as the socket lingers on)."""
    sock = t.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    t.abort()
