"""A request leaves nothing behind once it ends: checked with the garbage collector off,
so only references (not a later collection) decide what is freed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any, cast

import pytest

from mocks.mock_ie.script import Script
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline import chat as pipeline_chat
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import collect
from neutrino.pipeline.request import GenerateRequest
from tests.unit.core.test_pipeline_inprocess import chat, make


class Message(pipeline_chat.Message, frozen=True, gc=True, weakref=True):
    """A chat message that can be watched with a weak reference (the pipeline's own are
    untracked by the collector, which msgspec allows only without weak references; what
    frees a request's message is its reference count either way)."""


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_prompt_far_over_the_context_is_refused_and_released(no_gc: None) -> None:
    orch, engine = make()  # the model's context: 4096 tokens
    words = " ".join(["alpha", "beta", "gamma", "delta"] * 60_000)  # ~260k tokens
    msg = Message(role="user", content=words)
    watch = weakref.ref(msg)
    req = chat("", messages=(msg,))
    del msg
    with pytest.raises(NeutrinoError) as info:
        await orch.start(req)
    assert info.value.kind is ErrorKind.CONTEXT_LENGTH
    assert "maximum context length is 4096 tokens; the prompt has at least" in info.value.message
    del req, info
    assert watch() is None, gc.get_referrers(watch())
    assert not engine.queries
    error = cast(dict[str, Any], orch.history.latest(1)[0]["error"])
    assert error["kind"] == "context_length"


async def _serve(orch: Orchestrator, req: GenerateRequest) -> ErrorKind | None:
    """As a front end does: start, collect, close; the error's kind, if it failed. Its
    frame holds the request: a traceback kept past the request would keep it too."""
    gen = await orch.start(req)
    try:
        await collect(gen)
    except NeutrinoError as exc:
        return exc.kind
    finally:
        gen.close()
    return None


@pytest.mark.parametrize("timeout", [None, 0.05], ids=["served", "timed-out"])
async def test_a_request_is_released_when_it_ends(no_gc: None, timeout: float | None) -> None:
    stall = [{"match": "*", "fault": "stall", "fault_after": 2}] if timeout else []
    orch, _ = make(Script.from_rules(stall))
    msg = Message(role="user", content="hello " * 200)
    watch = weakref.ref(msg)
    req = chat("", max_tokens=8, timeout_s=timeout, messages=(msg,))
    del msg
    kind = await _serve(orch, req)
    assert kind is (ErrorKind.TIMEOUT if timeout else None)
    del req
    assert watch() is None
    assert orch.inflight == 0
