"""Where Neutrino's data files are, the same for a checkout and for an installed wheel.

The repository keeps them in its top-level folders ``assets/``, ``schemas/`` and
``protos/``. The package reaches them as ``neutrino/_assets``, ``neutrino/_schemas`` and
``neutrino/_protos``: in a checkout (and so in the editable install) these are symbolic
links to those folders, and a built wheel carries real copies of them as package data
(``[tool.setuptools.package-data]`` in pyproject.toml; setuptools copies what the links
point to). Code that reads these files at run time takes its paths from here, never from
the repository's layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["ASSETS", "ENGINE_SCHEMA", "PACKAGE", "PROTOS", "SCHEMAS", "TEMPLATES"]

# The neutrino package's folder: the checkout's neutrino/, or site-packages/neutrino/.
PACKAGE: Final = Path(__file__).resolve().parent
ASSETS: Final = PACKAGE / "_assets"  # assets/
SCHEMAS: Final = PACKAGE / "_schemas"  # schemas/
PROTOS: Final = PACKAGE / "_protos"  # protos/ (proto path of the gRPC API)

# Model families: chat templates, tokenizers, stop tokens, parsers.
TEMPLATES: Final = ASSETS / "templates.json"
# The engine protocol.
ENGINE_SCHEMA: Final = SCHEMAS / "ie.capnp"
