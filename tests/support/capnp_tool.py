"""Debian's ``capnp`` tool as an independent reader of our frames."""

from __future__ import annotations

import subprocess

from neutrino.engine.wire.schema import SCHEMA_PATH


def capnp_decode(frame: bytes) -> str:
    """``capnp decode --short schemas/ie.capnp Envelope`` of one frame, as text."""
    return subprocess.run(
        ["capnp", "decode", "--short", str(SCHEMA_PATH), "Envelope"],
        input=frame,
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
