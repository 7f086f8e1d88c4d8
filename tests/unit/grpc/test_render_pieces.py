"""A unary gRPC answer with large logprobs, serialised in slices, decodes to the message
rendered whole (grpc/render.py's response_pieces)."""

from __future__ import annotations

import random

from neutrino.frontends.grpc import render
from neutrino.v1 import inference_pb2
from tests.unit.http.test_pieces import _answer, _columns


def test_pieces_decode_to_the_whole_message() -> None:
    rng = random.Random(3)
    gens, results = _answer([_columns(rng, 700, 20)[0], _columns(rng, 1, 20)[0]])
    pieces = render.response_pieces(gens, results)
    assert pieces is not None
    parts = list(pieces)
    assert len(parts) > 700 // 32
    got = inference_pb2.GenerateResponse.FromString(b"".join(parts))
    whole = render.response(gens, results)
    assert got == whole
    assert len(got.choices[0].logprobs.content) == 700
    assert len(got.choices[0].logprobs.content[5].top_logprobs) in (19, 20)


def test_a_small_answer_is_not_cut() -> None:
    gens, results = _answer([_columns(random.Random(4), 20, 5)[0]])
    assert render.response_pieces(gens, results) is None
