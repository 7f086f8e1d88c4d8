"""What a protocol's wire module gives its transport: the request's path, body and headers,
and readers of the answer (streamed events or the whole body) into a :class:`Probe`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt


@dataclass(frozen=True, slots=True)
class Params:
    """What every request of a run shares."""

    model: str
    stream: bool = True
    ignore_eos: bool = False
    temperature: float | None = None


class StreamReader(Protocol):
    """Reads a streamed answer's server-sent events; ``done`` once its last event came."""

    done: bool

    def event(self, name: str, data: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Api:
    path: str
    body: Callable[[Prompt, Params], bytes]
    headers: Callable[[str | None], dict[str, str]]
    stream: Callable[[Probe], StreamReader]
    read_whole: Callable[[bytes, Probe], None]
