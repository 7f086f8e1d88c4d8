"""HTTP/1.1 transport (aiohttp) for the OpenAI chat and Anthropic Messages protocols."""

from __future__ import annotations

import aiohttp

from neutrino.loadgen.api import Api, Params
from neutrino.loadgen.errors import RequestFailed, http_failure
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt
from neutrino.loadgen.wire_openai import MODELS_PATH, answered_model
from neutrino.sse_decoder import SSEDecoder

MAX_BODY = 64 * 1024 * 1024  # a non-streamed answer
MAX_ERROR_BODY = 64 * 1024


class HttpDriver:
    """Requests of one protocol (``api``) to a server at ``base_url``, over a pool of at most
    ``connections`` keep-alive connections."""

    def __init__(self, base_url: str, api: Api, *, api_key: str | None, connections: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.api_key = api_key
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None)
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "start() first"
        return self._session

    async def first_model(self) -> str | None:
        hdrs = self.api.headers(self.api_key)
        async with self.session.get(self.base_url + MODELS_PATH, headers=hdrs) as resp:
            return answered_model(resp.status, await read_body(resp, MAX_BODY))

    async def send(self, prompt: Prompt, params: Params, probe: Probe) -> None:
        api = self.api
        data = api.body(prompt, params)
        url = self.base_url + api.path
        async with self.session.post(url, data=data, headers=api.headers(self.api_key)) as resp:
            if resp.status != 200:
                raise http_failure(resp.status, await read_body(resp, MAX_ERROR_BODY, cut=True))
            if not params.stream:
                api.read_whole(await read_body(resp, MAX_BODY), probe)
                return
            reader = api.stream(probe)
            decoder = SSEDecoder()
            async for chunk in resp.content.iter_any():
                for name, event in decoder.feed(chunk):
                    if not reader.done:
                        reader.event(name, event)
            if not reader.done:
                raise RequestFailed("incomplete stream", "the stream ended before its last event")

    @staticmethod
    def classify(exc: BaseException) -> tuple[str, str] | None:
        if isinstance(exc, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError):
            return "connection", str(exc) or type(exc).__name__
        if isinstance(exc, aiohttp.ClientError):
            return f"error {type(exc).__name__}", str(exc)
        return None


async def read_body(resp: aiohttp.ClientResponse, limit: int, *, cut: bool = False) -> bytes:
    """The whole body, at most ``limit`` bytes: a longer one fails the request, or with
    ``cut`` (an error's body) is cut there."""
    buf = bytearray()
    async for chunk in resp.content.iter_any():
        buf += chunk
        if len(buf) > limit:
            if cut:
                return bytes(buf[:limit])
            raise RequestFailed("answer too large", f"an answer over {limit} bytes")
    return bytes(buf)
