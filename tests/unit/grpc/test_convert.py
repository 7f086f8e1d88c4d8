"""neutrino.v1 messages <-> pipeline types, and the [grpc] configuration."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image as PILImage

from neutrino.config import ConfigError, LimitsConfig, load
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.grpc import convert, render
from neutrino.frontends.http.openai.parse import parse_chat, parse_completion
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.chat import ImagePart
from neutrino.pipeline.request import GenerateRequest
from neutrino.v1 import inference_pb2
from tests.support import requests as view
from tests.support.grpc_parity import grpc_request

LIMITS = LimitsConfig()


def chat(**kw: Any) -> inference_pb2.GenerateRequest:
    kw.setdefault("model", "m")
    kw.setdefault(
        "chat", inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content="hi")])
    )
    return inference_pb2.GenerateRequest(**kw)


def test_defaults_match_http() -> None:
    req = convert.to_request(chat(), LIMITS, stream=False)
    assert req.kind == "chat" and req.model == "m"
    s = req.sampling
    assert view.messages(req) == [{"role": "user", "content": "hi"}]
    assert s.max_tokens is None and s.seed is None and req.user is None
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (1.0, 1.0, -1, 0.0)
    assert (s.presence_penalty, s.frequency_penalty, s.repetition_penalty) == (0, 0, 1)
    assert req.chat.add_generation_prompt and not req.stream and not s.ignore_eos
    assert req.request_id.startswith("chatcmpl-")


def test_every_field_is_carried() -> None:
    msg = chat(
        max_tokens=9,
        temperature=0.5,
        top_p=0.25,
        top_k=0,
        min_p=0.125,
        seed=2**64 - 1,
        stop=["a", "b"],
        stop_token_ids=[5, 6],
        presence_penalty=-1.5,
        frequency_penalty=1.5,
        repetition_penalty=1.25,
        ignore_eos=True,
        min_tokens=3,
        user="u1",
    )
    msg.chat.add_generation_prompt = False
    req = convert.to_request(msg, LIMITS, stream=True)
    s = req.sampling
    assert s.max_tokens == 9 and s.temperature == 0.5 and s.top_p == 0.25
    assert s.top_k == -1 and s.min_p == 0.125 and s.seed == 2**64 - 1
    assert req.stops.strings == ("a", "b") and req.stops.token_ids == (5, 6)
    assert (s.presence_penalty, s.frequency_penalty, s.repetition_penalty) == (
        -1.5,
        1.5,
        1.25,
    )
    assert s.ignore_eos and s.min_tokens == 3 and req.user == "u1"
    assert not req.chat.add_generation_prompt and req.stream


def test_completion_defaults_to_16_tokens() -> None:
    msg = inference_pb2.GenerateRequest(
        model="m", completion=inference_pb2.Completion(prompt="Once")
    )
    req = convert.to_request(msg, LIMITS, stream=False)
    assert req.kind == "completion" and req.text_prompt.text == "Once"
    assert req.sampling.max_tokens == 16
    assert req.request_id.startswith("cmpl-")


@pytest.mark.parametrize(
    ("msg", "param"),
    [
        (chat(model=""), "model"),
        (inference_pb2.GenerateRequest(model="m"), "input"),
        (chat(chat=inference_pb2.Chat()), "chat.messages"),
        (
            chat(chat=inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="x")])),
            "chat.messages[0].role",
        ),
        (chat(max_tokens=0), "max_tokens"),
        (chat(max_tokens=-1), "max_tokens"),
        (chat(min_tokens=-1), "min_tokens"),
        (chat(top_k=-2), "top_k"),
        (chat(temperature=2.5), "temperature"),
        (chat(temperature=math.nan), "temperature"),
        (chat(top_p=0.0), "top_p"),
        (chat(min_p=1.5), "min_p"),
        (chat(presence_penalty=-3), "presence_penalty"),
        (chat(frequency_penalty=3), "frequency_penalty"),
        (chat(repetition_penalty=2.5), "repetition_penalty"),
        (chat(stop=["ok", ""]), "stop"),
        (chat(stop=["s"] * 17), "stop"),
        (chat(stop=["s" * 1025]), "stop"),
        (chat(stop_token_ids=[2**32 - 1]), "stop_token_ids"),
    ],
)
def test_bad_fields_are_bad_requests(msg: inference_pb2.GenerateRequest, param: str) -> None:
    with pytest.raises(NeutrinoError) as info:
        convert.to_request(msg, LIMITS, stream=False)
    assert info.value.kind is ErrorKind.BAD_REQUEST
    assert info.value.kind.spec.grpc == "INVALID_ARGUMENT"
    assert info.value.param == param


def test_outcome_mapping() -> None:
    out = Outcome(
        finish_reason="length",
        prompt_tokens=7,
        completion_tokens=5,
        cached_tokens=2,
        timings={"queue_time": 0.5, "prompt_time": 0.25, "completion_time": 1.0, "total_time": 2},
        stop_reason=None,
    )
    u = render.usage(out)
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cached_tokens) == (7, 5, 12, 2)
    assert (u.queue_time, u.prompt_time, u.completion_time, u.total_time) == (0.5, 0.25, 1, 2)
    assert render.finish_reason(out) == inference_pb2.FINISH_REASON_LENGTH
    assert render.stop_reason(out) is None
    out.finish_reason, out.stop_reason = "stop", "END"
    assert render.finish_reason(out) == inference_pb2.FINISH_REASON_STOP
    reason = render.stop_reason(out)
    assert reason is not None and reason.stop_string == "END"
    out.stop_reason = 151645
    reason = render.stop_reason(out)
    assert reason is not None and reason.stop_token_id == 151645


def test_grpc_config(tmp_path: Path) -> None:
    cfg = load([], environ={}).grpc
    assert cfg.enabled and cfg.address == "127.0.0.1:50051"
    assert cfg.max_message_bytes == 26 * 1024 * 1024
    flag = load(["--grpc-address", "0.0.0.0:6000"], environ={}).grpc
    assert flag.address == "0.0.0.0:6000"
    path = tmp_path / "n.toml"
    path.write_text('[grpc]\nenabled = false\naddress = "127.0.0.1:7000"\n')
    loaded = load(["--config", str(path)], environ={}).grpc
    assert not loaded.enabled and loaded.address == "127.0.0.1:7000"
    with pytest.raises(ConfigError):
        load(["--grpc-address", "nonsense"], environ={})


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {"n": {"minimum": 1}}},
        },
    }
]
BODIES: list[dict[str, Any]] = [
    {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s", "name": "boss"},
            {"role": "user", "content": [{"type": "text", "text": "look"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
                "reasoning_content": "r",
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": False,
        "logprobs": True,
        "top_logprobs": 3,
        "n": 2,
        "seed": 5,
        "stop": ["x"],
        "stop_token_ids": [7],
        "include_stop_str_in_output": True,
        "chat_template_kwargs": {"enable_thinking": False, "budget": 3},
        "reasoning_effort": "low",
        "add_generation_prompt": False,
    },
    {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": True},
        },
        "tool_choice": "none",
    },
]


def comparable(req: GenerateRequest) -> GenerateRequest:
    """``req`` without what differs between two requests that mean the same: the id and
    the identity of the strict format's check (its presence stays)."""
    output = msgspec.structs.replace(req.output, validator=req.output.validator is not None)
    return req.replace(request_id="", output=output)


@pytest.mark.parametrize("body", BODIES)
def test_a_grpc_request_means_what_its_openai_body_means(body: dict[str, Any]) -> None:
    """A gRPC request written from an OpenAI body (as the proto documents it) is
    translated into the same typed request as that body over HTTP: the same rules,
    defaults and values, neither built from the other."""
    grpc = convert.to_request(grpc_request(body), LIMITS, stream=False)
    assert comparable(grpc) == comparable(parse_chat(body, LIMITS))


def test_chat_only_and_completion_fields() -> None:
    msg = chat(structured_outputs=inference_pb2.StructuredOutputs(regex="[a-z]+"))
    msg.chat.reasoning_format = inference_pb2.REASONING_FORMAT_HIDDEN
    req = convert.to_request(msg, LIMITS, stream=True)
    assert req.output.reasoning_format == "hidden" and req.output.guided is not None
    assert req.stream and req.include_usage
    msg = inference_pb2.GenerateRequest(
        model="m",
        completion=inference_pb2.Completion(prompt_token_ids=[1, 2, 3]),
        logprobs=True,
        top_logprobs=2,
        structured_outputs=inference_pb2.StructuredOutputs(
            choice=inference_pb2.Choices(choices=["a", "b"])
        ),
    )
    req = convert.to_request(msg, LIMITS, stream=False)
    assert req.text_prompt.ids == (1, 2, 3) and not req.text_prompt.echo
    assert req.sampling.logprobs and req.sampling.top_logprobs == 2
    guided = req.output.guided
    assert guided is not None and guided.choices == ["a", "b"]
    body = {"model": "m", "prompt": [1, 2, 3], "logprobs": 2}
    body["structured_outputs"] = {"choice": ["a", "b"]}
    assert comparable(req) == comparable(parse_completion(body, LIMITS))
    msg.completion.echo = True  # as over HTTP: echo needs prompt logprobs
    with pytest.raises(NeutrinoError) as info:
        convert.to_request(msg, LIMITS, stream=False)
    assert info.value.kind is ErrorKind.UNSUPPORTED and info.value.param == "completion.echo"


def test_image_bytes_are_checked_as_images() -> None:
    msg = chat()
    msg.chat.messages[0].content = ""
    msg.chat.messages[0].parts.add(image=png_bytes((6, 5)))
    req = convert.to_request(msg, LIMITS, stream=False)
    assert req.chat.messages[0].content == (ImagePart(0),)
    assert (req.images[0].width, req.images[0].height) == (6, 5)
    msg.chat.messages[0].parts[0].image = b"\x89PNG"
    with pytest.raises(NeutrinoError) as info:
        convert.to_request(msg, LIMITS, stream=False)
    assert info.value.param == "chat.messages[0].parts[0]"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"tool_choice": "required"}, "chat.tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": ""}}]}, "chat.tools[0].name"),
        ({"chat_template_kwargs": {"tools": 1}}, "chat.chat_template_kwargs_json"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 1}}},
            "chat.response_format.json_schema.schema_json",
        ),
        ({"n": 99}, "n"),
    ],
)
def test_http_params_become_proto_paths(body: dict[str, Any], param: str) -> None:
    full = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(NeutrinoError) as info:
        convert.to_request(grpc_request(full), LIMITS, stream=False)
    assert info.value.param == param


def test_tool_parameters_that_are_no_object_name_the_json_field() -> None:
    msg = chat()
    msg.chat.tools.add(name="f", parameters_json="[1]")
    with pytest.raises(NeutrinoError) as info:
        convert.to_request(msg, LIMITS, stream=False)
    assert info.value.param == "chat.tools[0].parameters_json"


def png_bytes(size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", size).save(buf, "PNG")
    return buf.getvalue()
