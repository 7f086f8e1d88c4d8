"""Sans-IO splitter for standard Cap'n Proto stream framing.

A frame is a segment table (segment count - 1 as uint32, then one uint32 size in
words per segment, padded to 8 bytes) followed by the segments. ``FrameDecoder``
takes arbitrary byte chunks and returns whole frames; it refuses any frame whose
declared size exceeds the limit before buffering it.
"""

from __future__ import annotations

import struct

from neutrino.engine.wire.schema import MAX_FRAME_BYTES

_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<II")
_MAX_SEGMENTS = 512


class FrameTooLarge(ValueError):
    """A peer announced a frame larger than the allowed maximum."""


class FramingError(ValueError):
    """The byte stream is not valid Cap'n Proto stream framing."""


def frame_size(buf: bytes | bytearray | memoryview, start: int = 0) -> int | None:
    """Total size of the frame that starts at ``start``, or None if the header is incomplete."""
    avail = len(buf) - start
    if avail < 4:
        return None
    count: int = _U32.unpack_from(buf, start)[0] + 1
    if count > _MAX_SEGMENTS:
        raise FramingError(f"frame declares {count} segments")
    header = 4 * (count + 1)
    header += header & 4  # pad to a multiple of 8
    if avail < 4 + 4 * count:
        return None
    words = 0
    for i in range(count):
        size: int = _U32.unpack_from(buf, start + 4 + 4 * i)[0]
        words += size
    return header + 8 * words


class FrameDecoder:
    """Accumulates bytes and yields complete frames."""

    __slots__ = ("_buf", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return every frame now complete, in order."""
        buf = self._buf
        if not buf:
            n = len(data)
            if n >= 8 and type(data) is bytes:
                extra, words = _HEAD.unpack_from(data)
                if extra == 0 and 8 + 8 * words == n and n <= self.max_frame_bytes:
                    return [data]  # one whole one-segment frame: an engine step's read
            # Fast path: parse directly from the incoming chunk.
            frames, used = self._split(data)
            if used < len(data):
                buf += data[used:] if used else data
            return frames
        buf += data
        frames, used = self._split(buf)
        if used:
            del buf[:used]
        return frames

    def _split(self, data: bytes | bytearray) -> tuple[list[bytes], int]:
        frames: list[bytes] = []
        pos = 0
        end = len(data)
        limit = self.max_frame_bytes
        head = _HEAD
        while pos + 8 <= end:
            extra, words = head.unpack_from(data, pos)
            if extra == 0:  # one segment, the common case
                size = 8 + 8 * words
            else:
                got = frame_size(data, pos)
                if got is None:
                    break
                size = got
            if size > limit:
                raise FrameTooLarge(f"frame of {size} bytes exceeds the {limit} byte limit")
            if end - pos < size:
                break
            frames.append(bytes(data[pos : pos + size]))
            pos += size
        return frames, pos

    @property
    def buffered(self) -> int:
        return len(self._buf)
