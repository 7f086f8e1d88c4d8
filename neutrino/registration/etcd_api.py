"""etcd's v3 JSON gateway, sans-IO: the requests the registrar sends and what their
answers mean.

Every call is ``POST {endpoint}{path}`` with a JSON body; keys and values travel base64
encoded, 64-bit ids (leases, revisions) as decimal strings. An error answer carries
``error``/``message`` and a gRPC ``code`` (5, NOT_FOUND: "requested lease not found"). The
keep-alive path is a stream in gRPC; over the gateway one request gets one
``{"result": {...}}`` line, whose ``TTL`` is absent or 0 when the lease is gone.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EtcdError",
    "LeaseNotFound",
    "Request",
    "check",
    "delete",
    "grant",
    "keepalive",
    "keepalive_ttl",
    "lease_id",
    "put",
    "range_prefix",
    "range_values",
    "revoke",
]

_NOT_FOUND = 5  # gRPC status code


class EtcdError(Exception):
    """etcd answered with an error (it is up: trying another endpoint will not help)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class LeaseNotFound(EtcdError):
    """The lease expired or was revoked (or etcd lost its data)."""


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    body: dict[str, Any]


def _b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode("ascii")


def _prefix_end(prefix: str) -> str:
    """The end of etcd's range of keys that start with ``prefix`` (not empty): its last
    byte plus one (UTF-8 has no 0xFF byte to carry from)."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode("ascii")


def grant(ttl_s: int) -> Request:
    return Request("/v3/lease/grant", {"TTL": ttl_s})


def put(key: str, value: str, lease: int) -> Request:
    return Request("/v3/kv/put", {"key": _b64(key), "value": _b64(value), "lease": str(lease)})


def keepalive(lease: int) -> Request:
    return Request("/v3/lease/keepalive", {"ID": str(lease)})


def delete(key: str) -> Request:
    return Request("/v3/kv/deleterange", {"key": _b64(key)})


def revoke(lease: int) -> Request:
    return Request("/v3/lease/revoke", {"ID": str(lease)})


def range_prefix(prefix: str) -> Request:
    return Request("/v3/kv/range", {"key": _b64(prefix), "range_end": _prefix_end(prefix)})


def check(status: int, text: str) -> dict[str, Any]:
    """The answer's first JSON object (a stream's ``result`` unwrapped), or EtcdError."""
    line = next((x for x in text.splitlines() if x.strip()), "")
    try:
        data = json.loads(line) if line else {}
    except ValueError:
        raise EtcdError(f"HTTP {status}: not JSON: {line[:80]!r}") from None
    if not isinstance(data, dict):
        raise EtcdError(f"HTTP {status}: unexpected answer {line[:80]!r}")
    error = data.get("error")
    if isinstance(error, dict):  # a stream's error: {"error": {"grpc_code", "message"}}
        data = {"message": error.get("message", ""), "code": error.get("grpc_code")}
        error = data["message"]
    if error is not None or status >= 400:
        code = data.get("code")
        message = str(data.get("message") or error or f"HTTP {status}")
        kind = LeaseNotFound if code == _NOT_FOUND and "lease" in message else EtcdError
        raise kind(message, code if isinstance(code, int) else None)
    result = data.get("result", data)
    return result if isinstance(result, dict) else {}


def lease_id(answer: dict[str, Any]) -> int:
    """The lease a grant answer names."""
    try:
        lease = int(answer["ID"])
    except (KeyError, TypeError, ValueError):
        raise EtcdError(f"lease grant without an ID: {answer}") from None
    if lease == 0:
        raise EtcdError("lease grant with ID 0")
    return lease


def keepalive_ttl(answer: dict[str, Any]) -> int:
    """The lease's remaining TTL after a keep-alive: 0 when it is gone."""
    try:
        return max(0, int(answer.get("TTL", 0)))
    except (TypeError, ValueError):
        return 0


def range_values(answer: dict[str, Any]) -> dict[str, str]:
    """key -> value of a range answer."""
    found: dict[str, str] = {}
    for kv in answer.get("kvs", ()):
        key = base64.b64decode(kv.get("key", "")).decode()
        found[key] = base64.b64decode(kv.get("value", "")).decode()
    return found
