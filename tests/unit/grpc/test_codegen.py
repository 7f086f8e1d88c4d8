"""The generated stubs in use match what the protos generate now (never stale)."""

from __future__ import annotations

from pathlib import Path

from neutrino.frontends.grpc import codegen


def test_stubs_in_use_are_fresh(tmp_path: Path) -> None:
    fresh = codegen.generate(tmp_path)
    in_use = codegen.generated_files(codegen.OUT_ROOT)
    assert fresh, "protoc generated nothing"
    assert in_use == fresh, "stubs missing or left over: run `make protos`"
    stale = [
        str(rel)
        for rel in fresh
        if (tmp_path / rel).read_bytes() != (codegen.OUT_ROOT / rel).read_bytes()
    ]
    assert not stale, f"stale gRPC stubs (edited, or protos changed): {stale}; run `make protos`"


def test_every_proto_is_in_the_versioned_package() -> None:
    names = {p.name for p in codegen.proto_files()}
    assert {"common.proto", "inference.proto"} <= names
    for rel in codegen.proto_files():
        text = (codegen.PROTO_ROOT / rel).read_text()
        assert "package neutrino.v1;" in text, rel


def test_sync_rewrites_only_changed_files(tmp_path: Path) -> None:
    first = codegen.sync(tmp_path)
    assert sorted(first) == codegen.generated_files(tmp_path)
    assert codegen.sync(tmp_path) == []  # nothing changed
    victim = tmp_path / first[0]
    victim.write_text("# edited by hand\n")
    leftover = tmp_path / "neutrino" / "v1" / "gone_pb2.py"
    leftover.write_text("")
    assert sorted(codegen.sync(tmp_path)) == sorted([first[0], leftover.relative_to(tmp_path)])
    assert not leftover.exists()
