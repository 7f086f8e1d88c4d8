"""neutrino.v1 stays wire compatible: fields of the first release keep number and type.

Within v1, changes are additive only; these are the fields as released before the text
parity fields came (issue 17). A field renumbered, retyped or removed fails here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from neutrino.v1 import common_pb2, inference_pb2

F = FieldDescriptor
RELEASED: dict[Any, dict[str, tuple[int, int]]] = {
    inference_pb2.ChatMessage: {"role": (1, F.TYPE_STRING), "content": (2, F.TYPE_STRING)},
    inference_pb2.Chat: {
        "messages": (1, F.TYPE_MESSAGE),
        "add_generation_prompt": (2, F.TYPE_BOOL),
    },
    inference_pb2.Completion: {"prompt": (1, F.TYPE_STRING)},
    inference_pb2.GenerateRequest: {
        "model": (1, F.TYPE_STRING),
        "chat": (2, F.TYPE_MESSAGE),
        "completion": (3, F.TYPE_MESSAGE),
        "max_tokens": (4, F.TYPE_INT32),
        "temperature": (5, F.TYPE_FLOAT),
        "top_p": (6, F.TYPE_FLOAT),
        "top_k": (7, F.TYPE_INT32),
        "min_p": (8, F.TYPE_FLOAT),
        "seed": (9, F.TYPE_UINT64),
        "stop": (10, F.TYPE_STRING),
        "stop_token_ids": (11, F.TYPE_UINT32),
        "presence_penalty": (12, F.TYPE_FLOAT),
        "frequency_penalty": (13, F.TYPE_FLOAT),
        "repetition_penalty": (14, F.TYPE_FLOAT),
        "ignore_eos": (15, F.TYPE_BOOL),
        "min_tokens": (16, F.TYPE_INT32),
        "user": (17, F.TYPE_STRING),
    },
    inference_pb2.StopReason: {
        "stop_string": (1, F.TYPE_STRING),
        "stop_token_id": (2, F.TYPE_UINT32),
    },
    inference_pb2.GenerateResponse: {
        "id": (1, F.TYPE_STRING),
        "model": (2, F.TYPE_STRING),
        "created": (3, F.TYPE_INT64),
        "text": (4, F.TYPE_STRING),
        "finish_reason": (5, F.TYPE_ENUM),
        "usage": (6, F.TYPE_MESSAGE),
        "stop_reason": (7, F.TYPE_MESSAGE),
    },
    inference_pb2.GenerateStreamResponse: {
        "id": (1, F.TYPE_STRING),
        "model": (2, F.TYPE_STRING),
        "created": (3, F.TYPE_INT64),
        "delta": (4, F.TYPE_STRING),
        "finish_reason": (5, F.TYPE_ENUM),
        "usage": (6, F.TYPE_MESSAGE),
        "stop_reason": (7, F.TYPE_MESSAGE),
    },
    common_pb2.Usage: {
        "prompt_tokens": (1, F.TYPE_UINT32),
        "completion_tokens": (2, F.TYPE_UINT32),
        "total_tokens": (3, F.TYPE_UINT32),
        "cached_tokens": (4, F.TYPE_UINT32),
        "queue_time": (5, F.TYPE_DOUBLE),
        "prompt_time": (6, F.TYPE_DOUBLE),
        "completion_time": (7, F.TYPE_DOUBLE),
        "total_time": (8, F.TYPE_DOUBLE),
    },
}


def test_released_fields_keep_number_and_type() -> None:
    for cls, fields in RELEASED.items():
        desc = cls.DESCRIPTOR
        got = {f.name: (f.number, f.type) for f in desc.fields if f.name in fields}
        assert got == fields, desc.full_name


def test_released_enum_values_keep_their_numbers() -> None:
    assert inference_pb2.FINISH_REASON_UNSPECIFIED == 0
    assert inference_pb2.FINISH_REASON_STOP == 1
    assert inference_pb2.FINISH_REASON_LENGTH == 2
