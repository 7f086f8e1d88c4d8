"""Build hook: a built wheel carries the gRPC stubs generated from ``protos/``.

In a checkout ``make protos`` writes them into ``neutrino/v1/`` (gitignored), and the
editable install uses them there, untouched by this hook. A wheel (``pip install .``,
``pip wheel .``) gets its stubs regenerated in its build folder by the same code
(neutrino.frontends.grpc.codegen, with the build's grpcio-tools): a clean checkout needs no
``make protos``, and stale or left-over stubs of a checkout are replaced or removed. The
rest of the configuration is in pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithStubs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        sys.path.insert(0, str(ROOT))  # codegen needs only the standard library and grpc_tools
        try:
            from neutrino.frontends.grpc import codegen
        finally:
            sys.path.remove(str(ROOT))
        for rel in codegen.sync(Path(self.build_lib)):
            self.announce(f"gRPC stubs: updated {rel}", level=2)


setup(cmdclass={"build_py": BuildPyWithStubs})
