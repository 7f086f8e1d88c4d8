"""Loads the engine protocol schema (``schemas/ie.capnp``) once per process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import capnp

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "ie.capnp"

ie: Any = capnp.load(str(SCHEMA_PATH))

PROTOCOL_VERSION: int = int(ie.protocolVersion)
MAX_FRAME_BYTES: int = int(ie.maxFrameBytes)
