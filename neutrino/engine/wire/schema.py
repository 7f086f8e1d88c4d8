"""Loads the engine protocol schema (``schemas/ie.capnp``) once per process."""

from __future__ import annotations

from typing import Any, Final

import capnp

from neutrino import resources

SCHEMA_PATH: Final = resources.ENGINE_SCHEMA

ie: Any = capnp.load(str(SCHEMA_PATH))

PROTOCOL_VERSION: int = int(ie.protocolVersion)
MAX_FRAME_BYTES: int = int(ie.maxFrameBytes)
