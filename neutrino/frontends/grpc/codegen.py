"""Generate the Python gRPC stubs of ``protos/`` with ``grpc_tools.protoc``.

``protos/neutrino/v1/*.proto`` (proto package ``neutrino.v1``) compile with proto path
``protos/`` into the repository root, so the generated modules land in
``neutrino/v1/`` (gitignored) and protoc's absolute imports, such as
``from neutrino.v1 import common_pb2``, resolve as they are: nothing is post-processed
and nothing there is edited by hand. ``make protos`` (a dependency of ``make install``)
runs this; ``--out DIR`` writes a fresh copy elsewhere (the staleness test compares one).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROTO_ROOT = REPO / "protos"
PACKAGE_DIR = Path("neutrino") / "v1"  # relative to PROTO_ROOT and to the output root
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files(proto_root: Path = PROTO_ROOT) -> list[Path]:
    """The .proto files to compile, relative to ``proto_root``."""
    return sorted(p.relative_to(proto_root) for p in (proto_root / PACKAGE_DIR).glob("*.proto"))


def generate(out_root: Path, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Compile every proto into ``out_root``; returns the generated paths (relative)."""
    protos = proto_files(proto_root)
    if not protos:
        raise RuntimeError(f"no .proto files under {proto_root / PACKAGE_DIR}")
    out_root.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"--proto_path={proto_root}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(p) for p in protos),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed:\n{done.stderr}")
    return generated_files(out_root)


def generated_files(out_root: Path) -> list[Path]:
    folder = out_root / PACKAGE_DIR
    if not folder.is_dir():
        return []
    return sorted(
        p.relative_to(out_root)
        for p in folder.iterdir()
        if p.is_file() and p.name.endswith(GENERATED_SUFFIXES)
    )


def sync(out_root: Path = REPO) -> list[Path]:
    """Regenerate into ``out_root``, rewriting only files that changed and removing
    stubs of protos that are gone; returns the paths written or removed."""
    changed: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        for rel in fresh:
            dest = out_root / rel
            if dest.exists() and filecmp.cmp(Path(tmp) / rel, dest, shallow=False):
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / rel, dest)
            changed.append(rel)
        for rel in set(generated_files(out_root)) - set(fresh):
            (out_root / rel).unlink()
            changed.append(rel)
    return changed


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--out", type=Path, default=REPO, help="output root (default: the repo)")
    args = p.parse_args(argv)
    for rel in sync(args.out):
        print(f"protos: updated {rel}")


if __name__ == "__main__":
    main()
