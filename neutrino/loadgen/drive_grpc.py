"""gRPC transport: ``neutrino.v1.Inference`` Generate and GenerateStream with a Chat input."""

from __future__ import annotations

import grpc

from neutrino.loadgen.api import Params
from neutrino.loadgen.errors import RequestFailed
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt
from neutrino.v1 import common_pb2, inference_pb2, inference_pb2_grpc

MAX_MESSAGE = 64 * 1024 * 1024


def request(prompt: Prompt, params: Params) -> inference_pb2.GenerateRequest:
    messages = [inference_pb2.ChatMessage(role=r, content=t) for r, t in prompt.messages]
    req = inference_pb2.GenerateRequest(
        model=params.model, chat=inference_pb2.Chat(messages=messages)
    )
    if prompt.max_tokens is not None:
        req.max_tokens = prompt.max_tokens
    if params.temperature is not None:
        req.temperature = params.temperature
    req.ignore_eos = params.ignore_eos
    return req


def _usage(usage: common_pb2.Usage, probe: Probe) -> None:
    probe.usage(usage.prompt_tokens, usage.completion_tokens)


class GrpcDriver:
    """Calls over one channel to ``address`` (HOST:PORT, plaintext)."""

    def __init__(self, address: str, *, api_key: str | None) -> None:
        self.address = address
        self.metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        self._channel: grpc.aio.Channel | None = None
        self._stub: inference_pb2_grpc.InferenceStub | None = None

    async def start(self) -> None:
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            ("grpc.max_send_message_length", MAX_MESSAGE),
        ]
        self._channel = grpc.aio.insecure_channel(self.address, options=options)
        self._stub = inference_pb2_grpc.InferenceStub(self._channel)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()

    @property
    def stub(self) -> inference_pb2_grpc.InferenceStub:
        assert self._stub is not None, "start() first"
        return self._stub

    async def first_model(self) -> str | None:
        listed = await self.stub.ListModels(common_pb2.ListModelsRequest(), metadata=self.metadata)
        return listed.models[0].id if listed.models else None

    async def send(self, prompt: Prompt, params: Params, probe: Probe) -> None:
        req = request(prompt, params)
        if not params.stream:
            resp = await self.stub.Generate(req, metadata=self.metadata)
            probe.keep(resp.text)
            if resp.HasField("usage"):
                _usage(resp.usage, probe)
            return
        call = self.stub.GenerateStream(req, metadata=self.metadata)
        ended = False
        try:
            async for msg in call:
                if msg.delta:
                    probe.chunk(msg.delta)
                if msg.HasField("usage"):
                    _usage(msg.usage, probe)
                ended = ended or msg.finish_reason != inference_pb2.FINISH_REASON_UNSPECIFIED
        finally:
            call.cancel()  # nothing once the call ended; a timed-out one stops here
        if not ended:
            raise RequestFailed("incomplete stream", "the stream ended without a finish reason")

    @staticmethod
    def classify(exc: BaseException) -> tuple[str, str] | None:
        if isinstance(exc, grpc.aio.AioRpcError):
            return f"grpc {exc.code().name}", exc.details() or ""
        return None
