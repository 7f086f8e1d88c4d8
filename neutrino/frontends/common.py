"""What every front end shares: request ids, JSON number checks, a body's object members,
SSE headers, work taken off the event loop."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable
from typing import TypeVar

from neutrino.audio.codecs import AudioError, decode_upload
from neutrino.audio.wav import Audio
from neutrino.errors import ErrorKind, NeutrinoError, bad_request

# Request ids are unique across processes (the tag) and within one (the counter), and
# shared by every protocol: an id names one request wherever it came in.
_PROCESS_TAG = secrets.token_hex(8)
_COUNTER = itertools.count(1)

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


PRIORITY_HEADER = "x-neutrino-priority"


def asked_priority(value: str) -> int:
    """The priority a request asks for in ``x-neutrino-priority`` (-1: none asked);
    BAD_REQUEST for anything but an integer 0 to 9."""
    text = value.strip()
    if not text:
        return -1
    if len(text) == 1 and text.isdigit():
        return int(text)
    raise NeutrinoError(
        ErrorKind.BAD_REQUEST,
        f"{PRIORITY_HEADER} must be an integer from 0 to 9, got {text[:20]!r}",
        param=PRIORITY_HEADER,
    )


def new_id(prefix: str) -> str:
    return f"{prefix}-{_PROCESS_TAG}{next(_COUNTER):08x}"


_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:")
MAX_CLIENT_ID = 128


def client_request_id(value: str) -> str:
    """A client's ``X-Request-Id`` if it is one we echo and log (up to 128 of letters,
    digits and ``-_.:``), else "" (ignored: an id of ours is used)."""
    if not value or len(value) > MAX_CLIENT_ID or not _ID_CHARS.issuperset(value):
        return ""
    return value


def object_member(body: dict[str, object], key: str) -> dict[str, object] | None:
    """``body[key]`` when it is an object, None when absent or null (400 otherwise)."""
    value = body.get(key)
    if value is not None and not isinstance(value, dict):
        raise bad_request(f"{key} must be an object", key)
    return value


def request_id_for(prefix: str, client_id: str) -> str:
    """The id of a request: ``PREFIX-<the client's X-Request-Id>`` when it sent a valid
    one (as vLLM names it), else a new one."""
    return f"{prefix}-{client_id}" if client_id else new_id(prefix)


T = TypeVar("T")

# A request over this size that carries a JSON schema is checked on a worker thread
# (jsonschema is pure Python: a 50 KB schema takes a few hundred milliseconds).
SCHEMA_OFFLOAD_BYTES = 2048


class _Refused:
    """A refusal handed back from a worker thread (see :func:`off_loop`)."""

    __slots__ = ("error",)

    def __init__(self, error: NeutrinoError) -> None:
        self.error = error


async def off_loop(work: Callable[[], T]) -> T:
    """``work`` on a worker thread; a NeutrinoError it raises is raised here, fresh: one
    that crossed the thread's future would hold, through its traceback, the frames of
    the work (the request's body among their locals) until the garbage collector's next
    full pass."""

    def run() -> T | _Refused:
        try:
            return work()
        except NeutrinoError as err:
            return _Refused(err.fresh())

    result = await asyncio.to_thread(run)
    if isinstance(result, _Refused):
        raise result.error
    return result


_OFFLOAD_AUDIO_BYTES = 256 * 1024  # decode bigger uploads off the event loop


async def uploaded_audio(data: bytes, rate: int, max_seconds: float, param: str) -> Audio:
    """An upload's audio as the engine takes it: 16-bit mono PCM at ``rate`` (0: the
    file's own), decoded on a worker thread past 256 KiB; a 400 naming ``param`` if it
    cannot be."""

    def work() -> Audio:
        try:
            return decode_upload(data, rate=rate, max_seconds=max_seconds)
        except AudioError as exc:
            raise bad_request(str(exc), param) from None

    if len(data) > _OFFLOAD_AUDIO_BYTES:
        return await off_loop(work)
    return work()
