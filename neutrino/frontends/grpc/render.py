"""Sans-IO: the pipeline's results as ``neutrino.v1`` messages.

The same facts the HTTP routes render as JSON (text, reasoning, tool calls, logprobs,
finish and stop reasons, usage), taken from the same :class:`Outcome` and, for usage,
from the HTTP routes' own sum over the choices, so both protocols report one answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from neutrino.frontends.grpc.stubs import common_pb2, inference_pb2
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob, large
from neutrino.pipeline.modalities import ModelInfo
from neutrino.pipeline.pull import Batch
from neutrino.pipeline.usage import usage_of
from neutrino.text.parsers import ToolCallDelta

_FINISH = {
    "stop": inference_pb2.FINISH_REASON_STOP,
    "length": inference_pb2.FINISH_REASON_LENGTH,
    "tool_calls": inference_pb2.FINISH_REASON_TOOL_CALLS,
}
_TIMINGS = ("queue_time", "prompt_time", "completion_time", "total_time")


def finish_reason(outcome: Outcome) -> inference_pb2.FinishReason:
    return _FINISH.get(outcome.finish_reason, inference_pb2.FINISH_REASON_UNSPECIFIED)


def stop_reason(outcome: Outcome) -> inference_pb2.StopReason | None:
    r = outcome.stop_reason
    if isinstance(r, str):
        return inference_pb2.StopReason(stop_string=r)
    if isinstance(r, int):
        return inference_pb2.StopReason(stop_token_id=r)
    return None


def usage(outcomes: Outcome | Sequence[Outcome]) -> common_pb2.Usage:
    """The usage of one outcome, or of every choice's (pipeline.usage: what it counts)."""
    u = usage_of([outcomes] if isinstance(outcomes, Outcome) else outcomes)
    out = common_pb2.Usage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        total_tokens=u.total_tokens,
        cached_tokens=u.cached_tokens,
    )
    for key in _TIMINGS:
        setattr(out, key, u.timings.get(key, 0.0))
    if u.reasoning_tokens is not None:
        out.reasoning_tokens = u.reasoning_tokens
    return out


def logprobs(entries: Sequence[TokenLogprob]) -> inference_pb2.Logprobs:
    return inference_pb2.Logprobs(
        content=[
            inference_pb2.TokenLogprob(
                token=e.token,
                bytes=e.token_bytes,
                logprob=e.logprob,
                top_logprobs=[
                    inference_pb2.TopLogprob(token=t, bytes=b, logprob=lp) for t, b, lp in e.top
                ],
            )
            for e in entries
        ]
    )


def choice(
    index: int, text: str, outcome: Outcome, with_logprobs: bool = True
) -> inference_pb2.Choice:
    out = inference_pb2.Choice(
        index=index,
        text=text,
        finish_reason=finish_reason(outcome),
        tool_calls=[
            inference_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments)
            for c in outcome.tool_calls
        ],
    )
    stop = stop_reason(outcome)
    if stop is not None:
        out.stop_reason.CopyFrom(stop)
    if outcome.reasoning is not None:
        out.reasoning = outcome.reasoning
    if outcome.logprobs is not None and with_logprobs:
        out.logprobs.CopyFrom(logprobs(outcome.logprobs.entries()))
    return out


def response(
    gens: Sequence[Generation],
    results: Sequence[tuple[str, Outcome]],
    with_logprobs: bool = True,
) -> inference_pb2.GenerateResponse:
    """A unary answer: every choice, choice 0's text and reasons also at the top."""
    gen = gens[0]
    choices = [
        choice(i, g.echo + text, out, with_logprobs)
        for i, ((text, out), g) in enumerate(zip(results, gens, strict=True))
    ]
    first = choices[0]
    resp = inference_pb2.GenerateResponse(
        id=gen.request_id,
        model=gen.model,
        created=gen.created,
        text=first.text,
        finish_reason=first.finish_reason,
        usage=usage([out for _, out in results]),
        choices=choices,
    )
    if first.HasField("stop_reason"):
        resp.stop_reason.CopyFrom(first.stop_reason)
    return resp


_CHOICES = inference_pb2.GenerateResponse.DESCRIPTOR.fields_by_name["choices"].number
_LOGPROBS = inference_pb2.Choice.DESCRIPTOR.fields_by_name["logprobs"].number


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field of the protobuf wire format."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def response_pieces(
    gens: Sequence[Generation], results: Sequence[tuple[str, Outcome]]
) -> Iterator[bytes] | None:
    """A unary answer with large logprobs, serialised a slice of tokens at a time (None:
    it is small, ``response`` renders it whole). Each choice's ``logprobs`` is the
    concatenation of one Logprobs message per slice (repeated fields concatenate in the
    wire format), framed after the rest of its choice; the response's other fields come
    first. The bytes decode to the message ``response`` builds."""
    if not large([out.logprobs for _, out in results]):
        return None
    return _pieces(gens, results)


def _pieces(gens: Sequence[Generation], results: Sequence[tuple[str, Outcome]]) -> Iterator[bytes]:
    skeleton = response(gens, results, with_logprobs=False)
    choices = list(skeleton.choices)
    del skeleton.choices[:]
    yield skeleton.SerializeToString()
    for c, (_, out) in zip(choices, results, strict=True):
        columns = out.logprobs
        parts = [c.SerializeToString()]
        if columns is not None:
            lps = []
            for batch in columns.slices():
                lps.append(logprobs(batch).SerializeToString())
                yield b""  # a slice's work done
            parts.append(_field(_LOGPROBS, b"".join(lps)))
        yield _field(_CHOICES, b"".join(parts))


def _call_delta(c: ToolCallDelta) -> inference_pb2.ToolCallDelta:
    out = inference_pb2.ToolCallDelta(index=c.index, arguments=c.arguments)
    if c.id is not None:
        out.id = c.id
    if c.name is not None:
        out.name = c.name
    return out


class Chunks:
    """The stream messages of one request (every choice's)."""

    __slots__ = ("_created", "_id", "_model")

    def __init__(self, gen: Generation) -> None:
        self._id, self._model, self._created = gen.request_id, gen.model, gen.created

    def text(self, index: int, text: str) -> inference_pb2.GenerateStreamResponse:
        return inference_pb2.GenerateStreamResponse(
            id=self._id, model=self._model, created=self._created, index=index, delta=text
        )

    def batch(self, index: int, b: Batch | None) -> inference_pb2.GenerateStreamResponse:
        """A message of what choice ``index`` pushed (None: an empty one)."""
        msg = self.text(index, b.text if b is not None else "")
        if b is None:
            return msg
        if b.reasoning:
            msg.reasoning_delta = b.reasoning
        if b.tool_calls:
            msg.tool_calls.extend(_call_delta(c) for c in b.tool_calls)
        if b.logprobs is not None:
            msg.logprobs.CopyFrom(logprobs(b.logprobs))
        return msg

    def final(
        self,
        index: int,
        b: Batch | None,
        outcome: Outcome,
        outcomes: Sequence[Outcome] | None,
    ) -> inference_pb2.GenerateStreamResponse:
        """Choice ``index``'s last message: its last batch, finish and stop reason, and,
        in the stream's last message (``outcomes``: every choice's), the usage."""
        msg = self.batch(index, b)
        msg.finish_reason = finish_reason(outcome)
        stop = stop_reason(outcome)
        if stop is not None:
            msg.stop_reason.CopyFrom(stop)
        if outcomes is not None:
            msg.usage.CopyFrom(usage(outcomes))
        return msg


def model_card(info: ModelInfo, created: int) -> common_pb2.Model:
    return common_pb2.Model(
        id=info.name, context_length=info.context_length, created=created, owned_by="neutrino"
    )
