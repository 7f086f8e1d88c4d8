"""The registration record: its JSON form, the protobuf form, advertised addresses."""

from __future__ import annotations

import json

import pytest

from neutrino.registration import wire
from neutrino.registration.record import (
    InstanceRecord,
    Listener,
    LoadReport,
    ServedModel,
    advertised,
    new_instance_id,
)

RECORD = InstanceRecord(
    instance_id="host-1-abc",
    version="0.1.0",
    listeners=(Listener("http", "10.0.0.5:51055"), Listener("grpc", "[::1]:50051")),
    models=(
        ServedModel("qwen2.5-mock", 32768),
        ServedModel("qwen2.5-vl-mock", 32768, ("generate", "vision")),
    ),
    capacity=64,
    workers=2,
    started_at=1700000000.25,
)


def test_record_json_form() -> None:
    data = RECORD.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON types only
    assert data == {
        "instance_id": "host-1-abc",
        "version": "0.1.0",
        "listeners": [
            {"protocol": "http", "address": "10.0.0.5:51055"},
            {"protocol": "grpc", "address": "[::1]:50051"},
        ],
        "models": [
            {"name": "qwen2.5-mock", "context_length": 32768, "capabilities": ["generate"]},
            {
                "name": "qwen2.5-vl-mock",
                "context_length": 32768,
                "capabilities": ["generate", "vision"],
            },
        ],
        "capacity": 64,
        "workers": 2,
        "started_at": 1700000000.25,
    }
    assert InstanceRecord.from_dict(data) == RECORD


def test_protobuf_round_trip() -> None:
    assert wire.record_from_pb(wire.record_to_pb(RECORD)) == RECORD
    load = LoadReport(
        inflight=3, queue_depth=2, tokens_per_s=512.5, estimated_wait_s=1.5, capacity=4
    )
    msg = wire.report_to_pb("host-1-abc", load, sequence=7)
    assert (msg.instance_id, msg.sequence) == ("host-1-abc", 7)
    assert wire.report_from_pb(msg) == load
    assert load.to_dict()["estimated_wait_s"] == 1.5


def test_listener_protocols_are_a_fixed_set() -> None:
    for protocol in ("http", "grpc", "metrics", "admin", "quic"):
        Listener(protocol, "h:1")
    with pytest.raises(ValueError, match="ftp"):
        Listener("ftp", "h:1")


@pytest.mark.parametrize(
    ("address", "host", "expected"),
    [
        ("127.0.0.1:51055", "", "127.0.0.1:51055"),
        ("0.0.0.0:51055", "node7.example", "node7.example:51055"),
        ("[::]:50051", "node7.example", "node7.example:50051"),
        ("[::1]:50051", "", "[::1]:50051"),
        ("0.0.0.0:9089", "fd00::5", "[fd00::5]:9089"),
        (":8080", "h", "h:8080"),
    ],
)
def test_advertised_addresses(address: str, host: str, expected: str) -> None:
    assert advertised(address, host) == expected


def test_advertised_wildcard_defaults_to_the_host_name() -> None:
    import socket

    assert advertised("0.0.0.0:1") == f"{socket.gethostname()}:1"
    with pytest.raises(ValueError):
        advertised("no-port")


def test_instance_ids() -> None:
    assert new_instance_id("fixed") == "fixed"
    a, b = new_instance_id(), new_instance_id()
    assert a != b and a.rsplit("-", 2)[0] and a.split("-")[-2].isdigit()
