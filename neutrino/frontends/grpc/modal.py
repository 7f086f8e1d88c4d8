"""Shared by the modality services: a modality call's ``usage`` and its one result."""

from __future__ import annotations

from typing import TypeVar

from neutrino.engine.messages import ModalResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.grpc.stubs import common_pb2
from neutrino.pipeline.call import ModalCall

R = TypeVar("R", bound=ModalResult)


def usage(call: ModalCall, completion_tokens: int = 0) -> common_pb2.Usage:
    """Token counts and phase times of a finished call, in the shared ``Usage``."""
    t = call.lifecycle.timings()
    return common_pb2.Usage(
        prompt_tokens=call.prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=call.prompt_tokens + completion_tokens,
        queue_time=t["queue_time"],
        prompt_time=t["prompt_time"],
        completion_time=t["completion_time"],
        total_time=t["total_time"],
    )


async def one_result(call: ModalCall, kind: type[R]) -> R:
    """The call's single result, checked to be a ``kind`` (else an engine error)."""
    result = await call.result()
    if not isinstance(result, kind):
        raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape")
    return result
