"""Which served model a request names, and whether it can do what the request asks."""

from __future__ import annotations

from neutrino.engine.client import EngineClient
from neutrino.engine.messages import Capability, ModelInfo
from neutrino.errors import ErrorKind, NeutrinoError


def model_info(engines: EngineClient, model: str) -> ModelInfo:
    """The engine info of a served model that generates text; NO_ENGINE when none is
    connected, MODEL_NOT_FOUND when none serves it."""
    info = engines.models().get(model)
    if info is not None:
        if model in engines.relayed:
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED,
                f"the model {model!r} is served by a passthrough upstream: only the routes it"
                " relays reach it (/v1/chat/completions, /v1/completions, /v1/messages)",
                param="model",
            )
        if not info.can(Capability.GENERATE):
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST, f"the model {model!r} does not generate text", param="model"
            )
        return info
    if not engines.has_engine():
        raise NeutrinoError(ErrorKind.NO_ENGINE, "no inference engine is connected")
    raise NeutrinoError(
        ErrorKind.MODEL_NOT_FOUND, f"the model {model!r} does not exist", param="model"
    )


def capable(engines: EngineClient, model: str, capability: Capability) -> ModelInfo:
    """The model's engine info, if it is served and can do ``capability``."""
    info = engines.models().get(model)
    if info is None:
        return model_info(engines, model)  # raises: no engine, or no such model
    if not info.can(capability):
        raise NeutrinoError(
            ErrorKind.BAD_REQUEST,
            f"the model {model!r} does not support {capability.name.lower()}",
            param="model",
        )
    return info
