"""The pipeline against the in-process engine seam (mock_ie's core, no sockets)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.script import Script
from mocks.mock_ie.server import MockServer
from neutrino.config import Config, LimitsConfig
from neutrino.engines.inprocess import InProcessEngineClient
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.chat import Message
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import Pull, collect
from neutrino.pipeline.request import ChatPrompt, GenerateRequest, Origin
from neutrino.pipeline.sampling import SamplingParams, StopRules
from neutrino.pipeline.state import State

MODEL = "qwen2.5-mock"


def make(script: Script | None = None, **limits: Any) -> tuple[Orchestrator, InProcessEngineClient]:
    core = MockEngine([MockModel(MODEL, "qwen2", 4096)], capacity=4, script=script)
    engine = MockServer(core).in_process()
    cfg = Config(limits=LimitsConfig(**limits))
    texts = ModelTexts(cfg.model)
    return Orchestrator(cfg, engine, texts, History(100)), engine


def chat(
    text: str,
    *,
    stop: list[str] | None = None,
    timeout_s: float | None = None,
    messages: tuple[Message, ...] | None = None,
    **sampling: Any,
) -> GenerateRequest:
    """A chat request of one user turn (or ``messages``), as a front end would freeze it."""
    return GenerateRequest(
        request_id="chatcmpl-t",
        model=MODEL,
        prompt=ChatPrompt(messages or (Message("user", text),)),
        sampling=SamplingParams(**sampling),
        stops=StopRules(tuple(stop or ())),
        origin=Origin(timeout_s=timeout_s),
    )


async def test_complete_generation_and_history() -> None:
    orch, engine = make()
    gen = await orch.start(chat("hello", max_tokens=12, seed=1))
    text, outcome = await collect(gen)
    assert text and outcome.finish_reason in {"stop", "length"}
    assert outcome.completion_tokens <= 12
    assert gen.lifecycle.state is State.COMPLETE
    rec = orch.history.latest(1)[0]
    assert rec["state"] == "complete" and rec["finish_reason"] == outcome.finish_reason
    assert orch.inflight == 0 and not engine.cancels


async def test_scripted_text_and_stop_string_cancels_engine_once() -> None:
    script = Script.from_rules([{"match": "*", "reply": "alpha beta STOP gamma delta epsilon"}])
    orch, engine = make(script)
    gen = await orch.start(chat("x", max_tokens=50, stop=["STOP"]))
    text, outcome = await collect(gen)
    assert text == "alpha beta "
    assert outcome.finish_reason == "stop" and outcome.stop_reason == "STOP"
    # The engine was still generating: exactly one cancel frame.
    assert len(engine.cancels) <= 1
    assert not engine.active


async def test_undecodable_output_fails_the_request_and_cancels_the_engine_once() -> None:
    script = Script.from_rules([{"match": "*", "reply_tokens": [9707, 2**31, 11, 12, 13]}])
    orch, engine = make(script)
    gen = await orch.start(chat("x", max_tokens=50))
    with pytest.raises(NeutrinoError) as info:
        await asyncio.wait_for(collect(gen), 1.0)
    assert info.value.kind is ErrorKind.ENGINE_ERROR
    assert "2147483648" in info.value.message
    assert gen.lifecycle.state is State.FAILED
    assert [reason for _, reason in engine.cancels] == ["output rejected"]
    assert not engine.active and orch.inflight == 0


async def test_client_close_sends_exactly_one_cancel() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 2, "reply": "one two three four five six"}]
    )
    orch, engine = make(script)
    gen = await orch.start(chat("x", max_tokens=50))
    pull = Pull(gen)
    await asyncio.wait_for(pull.wait(), 1.0)
    assert pull.take()[0]
    gen.close()
    gen.close()
    assert len(engine.cancels) == 1
    assert gen.lifecycle.state is State.CANCELLED
    assert orch.history.latest(1)[0]["state"] == "cancelled"


async def test_engine_disconnect_fails_request() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 1, "reply": "one two three"}]
    )
    orch, engine = make(script)
    gen = await orch.start(chat("x", max_tokens=20))
    engine.disconnect()
    with pytest.raises(NeutrinoError) as info:
        await asyncio.wait_for(collect(gen), 1)
    assert info.value.kind is ErrorKind.ENGINE_DISCONNECTED
    assert gen.lifecycle.state is State.FAILED


async def test_engine_that_drops_its_connection_fails_the_request_and_is_reconnected() -> None:
    """The mock's own handler acts out the drop, as it does on a socket: what it sent
    before the drop arrives, the request fails, the next one runs on a new connection."""
    script = Script.from_rules(
        [{"match": "drop me", "fault": "drop", "fault_after": 2, "reply": "one two three four"}]
    )
    orch, engine = make(script)
    gen = await orch.start(chat("drop me", max_tokens=20))
    pull = Pull(gen)
    await asyncio.wait_for(pull.wait(), 1.0)
    assert pull.take()[0] == "one two"
    with pytest.raises(NeutrinoError) as info:
        await asyncio.wait_for(collect(gen), 1)
    assert info.value.kind is ErrorKind.ENGINE_DISCONNECTED
    assert gen.lifecycle.state is State.FAILED and not engine.cancels
    text, outcome = await collect(await orch.start(chat("hello", max_tokens=4)))
    assert text and outcome.finish_reason in {"stop", "length"}
    assert engine.connected and not engine.active and orch.inflight == 0


async def test_engine_error_fault_reaches_the_request_as_an_engine_error() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "error", "fault_after": 1, "error_code": "overloaded"}]
    )
    orch, engine = make(script)
    with pytest.raises(NeutrinoError) as info:
        await asyncio.wait_for(collect(await orch.start(chat("x", max_tokens=20))), 1)
    assert info.value.kind is ErrorKind.ENGINE_OVERLOADED
    assert not engine.active and not engine.cancels and orch.inflight == 0


async def test_timeout_cancels_and_fails() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 0, "reply": "never"}]
    )
    orch, engine = make(script)
    req = chat("x", max_tokens=5, timeout_s=0.05)
    gen = await orch.start(req)
    with pytest.raises(NeutrinoError) as info:
        await collect(gen)
    assert info.value.kind is ErrorKind.TIMEOUT
    assert len(engine.cancels) == 1 and engine.cancels[0][1] == "timeout"


async def test_validation_errors_never_reach_the_engine() -> None:
    orch, engine = make()
    cases = [
        (chat("x", max_tokens=5000), ErrorKind.CONTEXT_LENGTH, "max_tokens"),
        (chat("word " * 5000), ErrorKind.CONTEXT_LENGTH, "messages"),
        (
            GenerateRequest("c", "nope", ChatPrompt((Message("user", "x"),))),
            ErrorKind.MODEL_NOT_FOUND,
            "model",
        ),
    ]
    for req, kind, param in cases:
        with pytest.raises(NeutrinoError) as info:
            await orch.start(req)
        assert info.value.kind is kind and info.value.param == param
    assert not engine.queries
    assert all(r["state"] == "failed" for r in orch.history.latest(10))


async def test_queue_full_and_fifo_admission() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 0, "reply": "never"}]
    )
    orch, _ = make(script, max_inflight=1, max_queue=1)
    first = await orch.start(chat("a", max_tokens=5))
    queued = asyncio.ensure_future(orch.start(chat("b", max_tokens=5)))
    await asyncio.sleep(0.01)
    assert orch.admission.queued == 1
    with pytest.raises(NeutrinoError) as info:
        await orch.start(chat("c", max_tokens=5))
    assert info.value.kind is ErrorKind.QUEUE_FULL
    first.close()
    second = await asyncio.wait_for(queued, 1)
    assert second.lifecycle.state is State.PROCESSING
    second.close()
    assert orch.inflight == 0


async def test_shutdown_ends_live_and_queued_requests_once_each() -> None:
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 1, "reply": "never ending"}]
    )
    orch, engine = make(script, max_inflight=2, max_queue=4)
    live = [await orch.start(chat(f"{i}", max_tokens=50)) for i in range(2)]
    queued = [asyncio.ensure_future(orch.start(chat(f"q{i}", max_tokens=5))) for i in range(3)]
    await asyncio.sleep(0.01)
    assert orch.admission.queued == 3
    assert orch.shutdown() == 5
    for gen in live:
        with pytest.raises(NeutrinoError) as info:
            await collect(gen)
        assert info.value.kind is ErrorKind.SHUTTING_DOWN
        gen.close()  # the front end's own close afterwards sends nothing more
    for fut in queued:
        with pytest.raises(NeutrinoError) as info:
            await fut
        assert info.value.kind is ErrorKind.SHUTTING_DOWN
    assert sorted(reason for _, reason in engine.cancels) == ["shutdown", "shutdown"]
    assert orch.inflight == 0 and orch.admission.queued == 0
    states = [r["state"] for r in orch.history.latest(10)]
    assert states == ["failed"] * 5
    with pytest.raises(NeutrinoError) as info:
        await orch.start(chat("late", max_tokens=5))
    assert info.value.kind is ErrorKind.SHUTTING_DOWN


async def test_a_request_handed_a_slot_as_the_shutdown_comes_never_reaches_the_engine() -> None:
    """The queue hands the freed slot to a waiter, and the shutdown runs before that
    waiter resumes: it is no longer queued, not yet live; it must not be submitted."""
    script = Script.from_rules(
        [{"match": "*", "fault": "stall", "fault_after": 1, "reply": "never ending"}]
    )
    orch, engine = make(script, max_inflight=1, max_queue=2)
    first = await orch.start(chat("a", max_tokens=5))
    queued = asyncio.ensure_future(orch.start(chat("b", max_tokens=5)))
    await asyncio.sleep(0.01)
    first.close()  # frees the slot: the waiter's future is resolved, it has not run yet
    orch.shutdown()
    with pytest.raises(NeutrinoError) as info:
        await queued
    assert info.value.kind is ErrorKind.SHUTTING_DOWN
    assert len(engine.queries) == 1 and orch.inflight == 0


async def test_a_length_cut_inside_a_character_drops_its_logprobs_across_frames() -> None:
    """Issue 18 item 5, whole answer: the engine sends one token a frame with logprobs;
    cut inside 𪚥 ("\\xf0\\xaa", "\\x9a", "\\xa5"), the answer and its logprobs end
    before it, and every token counts."""
    script = Script.from_rules([{"match": "*", "reply": "ok x𪚥 more"}])
    orch, _ = make(script)
    gen = await orch.start(chat("cut", max_tokens=4, logprobs=True, top_logprobs=1))
    text, outcome = await collect(gen)
    assert (text, outcome.finish_reason, outcome.completion_tokens) == ("ok x", "length", 4)
    assert outcome.logprobs is not None
    assert b"".join(e.token_bytes for e in outcome.logprobs.entries()) == b"ok x"


@pytest.mark.parametrize("inline_chars", [4096, 0])
async def test_a_strict_formats_check_of_a_long_answer_runs_on_a_thread(
    monkeypatch: pytest.MonkeyPatch, inline_chars: int
) -> None:
    """Past INLINE_CHECK_CHARS the strict check runs on a worker thread and the request
    ends when it comes back: the same answers as checked at once, a valid one complete,
    a broken one the format error."""
    import neutrino.pipeline.generation as generation
    from neutrino.frontends.http.openai.parse import parse_chat

    monkeypatch.setattr(generation, "INLINE_CHECK_CHARS", inline_chars)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": schema, "strict": True}}
    broken_engine = Script.from_rules([{"match": "*", "reply": "Sunny.", "unguided": True}])
    for script, broken in ((None, False), (broken_engine, True)):
        orch, _ = make(script)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "weather as JSON"}]}
        req = parse_chat({**body, "max_tokens": 50, "response_format": fmt}, LimitsConfig())
        gen = await orch.start(req)
        if broken:
            with pytest.raises(NeutrinoError) as info:
                await collect(gen)
            assert info.value.code == "response_format_violated"
            assert gen.lifecycle.state is State.FAILED
        else:
            text, outcome = await collect(gen)
            assert outcome.finish_reason == "stop" and "city" in text
            assert gen.lifecycle.state is State.COMPLETE
        assert orch.inflight == 0
