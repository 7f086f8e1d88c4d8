"""An HTTP upstream's probes: what it serves, read from its own endpoints (llama.cpp's
``/props`` and router mode, vLLM's ``/version``, the ``/models`` listing), and the loads
and unloads of a server that loads its models on demand. The asyncio adapter
(``pool.py``) runs a probe every ``refresh_s`` and keeps what it found.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any

import orjson

from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.client import classify_engine_error
from neutrino.engine.messages import HelloAck, ModelInfo, ModelState
from neutrino.engine.upstream import listing, llamacpp, vllm
from neutrino.engine.upstream.errors import MAX_ERROR_BYTES, upstream_error
from neutrino.engine.upstream.http1 import Response
from neutrino.errors import ErrorKind, NeutrinoError

DEFAULT_CONTEXT = 4096
MAX_PROBE_BYTES = 4 * 1024 * 1024

# An HTTP request to a URL under the upstream's origin: (method, url, body) -> Response.
Request = Callable[[str, str, bytes], Coroutine[Any, Any, Response]]


class UpstreamDown(Exception):
    """The upstream did not answer its health or model probe as expected."""


class Prober:
    """What one upstream serves, as its probes find it."""

    def __init__(
        self,
        cfg: EngineConfig,
        link: EngineLinkConfig,
        name: str,
        request: Request,
    ) -> None:
        self.cfg = cfg
        self.name = name
        self._link = link
        self._request = request
        self._root = llamacpp.root_of(cfg.url)
        # Token mode's dialect, as the probe found the server (llama.cpp's, or vLLM's).
        self.dialect: ModuleType = llamacpp
        self.loads_models = False  # a server that loads its models on demand (control)
        self._contexts: dict[str, int] = {}  # such a server's models' contexts, once loaded

    @property
    def passthrough(self) -> bool:
        return self.cfg.mode == "passthrough"

    def upstream_name(self, model: str) -> str:
        return self.cfg.upstream_names.get(model, model)

    def generate_url(self) -> str:
        if self.dialect is vllm:
            return self.cfg.url.rstrip("/") + vllm.PATH  # under /v1
        return self._root + llamacpp.PATH  # the server's native endpoint

    async def await_state(self, model: str, load: bool, name: str) -> None:
        path = listing.LOAD_PATH if load else listing.UNLOAD_PATH
        status, body = await self._post(self._root + path, {"model": model})
        want = ModelState.LOADED if load else ModelState.UNLOADED
        delay = 0.05
        while True:
            entry = (await self._models()).get(model)
            if entry is None:
                raise NeutrinoError(
                    ErrorKind.MODEL_NOT_FOUND, f"the upstream {self.name!r} does not list {name!r}"
                )
            if entry.state is want:
                return
            if status != 200 and entry.state is not ModelState.LOADING:
                raise classify_engine_error(upstream_error(status, body), self.name)
            if load and entry.failed:
                raise NeutrinoError(
                    ErrorKind.ENGINE_ERROR,
                    f"the upstream {self.name!r} could not load {name!r}: {entry.failed}",
                )
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 2)

    async def _post(self, url: str, doc: dict[str, object]) -> tuple[int, bytes]:
        async with asyncio.timeout(self._link.connect_timeout_s * 2):
            resp: Response = await self._request("POST", url, orjson.dumps(doc))
            try:
                return resp.status, (await resp.read(MAX_ERROR_BYTES))[:MAX_ERROR_BYTES]
            finally:
                resp.close()

    async def _get(self, url: str) -> Any:
        async with asyncio.timeout(self._link.connect_timeout_s * 2):
            resp: Response = await self._request("GET", url, b"")
            try:
                body = await resp.read(MAX_PROBE_BYTES)
            finally:
                resp.close()
        if resp.status != 200:
            raise UpstreamDown(f"GET {url}: HTTP status {resp.status}")
        if len(body) > MAX_PROBE_BYTES:
            raise UpstreamDown(f"GET {url}: longer than {MAX_PROBE_BYTES} bytes")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamDown(f"GET {url}: not JSON") from None

    async def probe(self) -> HelloAck:
        """What the upstream serves now (UpstreamDown if it cannot serve in this mode)."""
        cfg = self.cfg
        if self.passthrough:
            listed = await self._models()
            if listing.loads_on_demand(listed):
                return await self._on_demand(listed, None, f"passthrough to {cfg.url}")
            models = [
                ModelInfo(
                    name, cfg.context_length or (listed[name].context if name in listed else 0)
                )
                for name in cfg.models or listed
            ]
            return HelloAck(f"passthrough to {cfg.url}", 0, models, cfg.capacity)
        props_doc = await self._get_or_none(self._root + "/props")
        most = listing.router_max(props_doc)
        if most is not None:
            self.dialect = llamacpp
            engine = f"{llamacpp.DIALECT} router at {self._root}"
            return await self._on_demand(await self._models(), most, engine)
        props = llamacpp.props_of(props_doc)
        if props is not None:
            self.dialect = llamacpp
            n_ctx, slots = props
            names = cfg.models or tuple(await self._models())
            context = cfg.context_length or n_ctx or DEFAULT_CONTEXT
            models = [ModelInfo(name, context) for name in names]
            capacity = min(cfg.capacity, slots) if slots > 0 else cfg.capacity
            return HelloAck(f"{llamacpp.DIALECT} at {self._root}", 0, models, capacity)
        version = vllm.version_of(await self._get_or_none(self._root + "/version"))
        if version is None:
            raise UpstreamDown(
                f"{self._root} is neither llama.cpp's server (GET /props) nor vLLM's (GET"
                " /version): token mode needs one of them; for another OpenAI-compatible"
                ' server use mode = "passthrough"'
            )
        self.dialect = vllm
        listed = await self._models()
        models = [
            ModelInfo(
                name,
                cfg.context_length or (listed[name].context if name in listed else 0)
                or DEFAULT_CONTEXT,
            )
            for name in cfg.models or listed
        ]  # fmt: skip
        return HelloAck(f"{vllm.DIALECT} {version} at {self._root}", 0, models, cfg.capacity)

    async def _on_demand(
        self, listed: dict[str, listing.Listed], most: int | None, engine: str
    ) -> HelloAck:
        """The hello of a server that loads its models on demand (llama.cpp's router):
        each model with its state, weighing one against a budget of ``most`` models."""
        if most is None:
            most = listing.router_max(await self._get_or_none(self._root + "/props")) or 0
        cfg = self.cfg
        models: list[ModelInfo] = []
        for name in cfg.models or listed:
            entry = listed.get(self.upstream_name(name))
            if entry is None:
                continue  # configured, but the server cannot load it
            state = entry.state if entry.state is not None else ModelState.LOADED
            if state is ModelState.LOADED and name not in self._contexts and not cfg.context_length:
                self._contexts[name] = await self._context_of(name)
            context = cfg.context_length or self._contexts.get(name) or entry.context
            models.append(ModelInfo(name, context or DEFAULT_CONTEXT, state=state, size_bytes=1))
        if not models:
            raise UpstreamDown(f"{cfg.url}/models lists none of the models {list(cfg.models)}")
        self.loads_models = True
        return HelloAck(engine, 0, models, cfg.capacity, memory_budget=most or len(models))

    async def _context_of(self, name: str) -> int:
        """A loaded model's context per slot, from its own ``/props`` (0: not said)."""
        query = urllib.parse.urlencode({"model": self.upstream_name(name)})
        props = llamacpp.props_of(await self._get_or_none(f"{self._root}/props?{query}"))
        return props[0] if props is not None else 0

    async def _get_or_none(self, url: str) -> Any:
        """``_get``, None when the server answers with an error status or not JSON."""
        try:
            return await self._get(url)
        except UpstreamDown:
            return None

    async def _models(self) -> dict[str, listing.Listed]:
        """The upstream's ``/models`` (UpstreamDown when it lists none)."""
        models = listing.models_of(await self._get(self.cfg.url.rstrip("/") + "/models"))
        if not models:
            raise UpstreamDown(f"{self.cfg.url}/models lists no model")
        return models
