"""Packed little-endian arrays: how token ids and logprobs travel in ``Data`` fields."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

LITTLE = sys.byteorder == "little"


def pack_u32(values: Sequence[int]) -> bytes:
    a = array("I", values)
    if not LITTLE:
        a.byteswap()
    return a.tobytes()


def unpack_u32(data: bytes | memoryview) -> list[int]:
    a = array("I")
    a.frombytes(data)
    if not LITTLE:
        a.byteswap()
    return a.tolist()


def pack_u64(values: Sequence[int]) -> bytes:
    a = array("Q", values)
    if not LITTLE:
        a.byteswap()
    return a.tobytes()


def unpack_u64(data: bytes | memoryview) -> list[int]:
    a = array("Q")
    a.frombytes(data)
    if not LITTLE:
        a.byteswap()
    return a.tolist()


def pack_f32(values: Sequence[float]) -> bytes:
    a = array("f", values)
    if not LITTLE:
        a.byteswap()
    return a.tobytes()


def unpack_f32(data: bytes | memoryview) -> list[float]:
    a = array("f")
    a.frombytes(data)
    if not LITTLE:
        a.byteswap()
    return a.tolist()
