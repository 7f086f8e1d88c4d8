"""HTTP/3 transport (neutrino.loadgen.h3 over aioquic) for OpenAI chat completions."""

from __future__ import annotations

from neutrino.loadgen.api import Api, Params
from neutrino.loadgen.errors import RequestFailed, http_failure
from neutrino.loadgen.h3 import H3Client, H3Response
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt
from neutrino.loadgen.wire_openai import MODELS_PATH, answered_model
from neutrino.sse_decoder import SSEDecoder

MAX_BODY = 64 * 1024 * 1024


class H3Driver:
    """Requests over one QUIC connection to ``host:port``, each on its own stream (the
    server's certificate is not checked: a local server's is self-signed)."""

    def __init__(self, host: str, port: int, api: Api, *, api_key: str | None) -> None:
        self.api = api
        self.api_key = api_key
        self._client = H3Client(host, port, verify=False)
        self._open = False

    async def start(self) -> None:
        await self._client.__aenter__()
        self._open = True

    async def close(self) -> None:
        if self._open:
            await self._client.aclose()

    async def first_model(self) -> str | None:
        resp = await self._client.request("GET", MODELS_PATH, self.api.headers(self.api_key))
        return answered_model(resp.status, await read_body(resp, MAX_BODY))

    async def send(self, prompt: Prompt, params: Params, probe: Probe) -> None:
        api = self.api
        resp = await self._client.request(
            "POST", api.path, api.headers(self.api_key), api.body(prompt, params)
        )
        try:
            if resp.status != 200:
                raise http_failure(resp.status, await read_body(resp, MAX_BODY))
            if not params.stream:
                api.read_whole(await read_body(resp, MAX_BODY), probe)
                return
            reader = api.stream(probe)
            decoder = SSEDecoder()
            async for chunk in resp.chunks():
                for name, event in decoder.feed(chunk):
                    if not reader.done:
                        reader.event(name, event)
            if not reader.done:
                raise RequestFailed("incomplete stream", "the stream ended before its last event")
        finally:
            if not resp.ended:
                resp.reset()  # abandoned (a timeout, an error): the server stops at once

    @staticmethod
    def classify(exc: BaseException) -> tuple[str, str] | None:
        return None  # H3Error is a ConnectionError: counted as "connection"


async def read_body(resp: H3Response, limit: int) -> bytes:
    buf = bytearray()
    async for chunk in resp.chunks():
        buf += chunk
        if len(buf) > limit:
            raise RequestFailed("answer too large", f"an answer over {limit} bytes")
    return bytes(buf)
