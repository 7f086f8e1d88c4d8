"""The package's layers, read from its imports (every ``import`` in every module).

Front ends reach engines only through the pipeline; the pipeline reaches them only
through the seam (``engine/client.py``) and the message types; no module imports
itself again through others (a cycle makes the import order matter).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "neutrino"
GENERATED = {"neutrino.v1"}  # protoc's stubs, built by make protos


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    _module_name(p): p
    for p in sorted(PACKAGE.rglob("*.py"))
    if not any(_module_name(p).startswith(g) for g in GENERATED)
}


def _resolve(name: str) -> str | None:
    """The module of ours that ``name`` (a module or a name in one) refers to."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, typing_too: bool = False) -> Iterator[str]:
    """Every module of ours that ``module`` imports (outside ``if TYPE_CHECKING``, unless
    ``typing_too``)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing_too
        for n in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                yield target


GRAPH = {m: set(_imports(m)) for m in MODULES}


def test_the_scan_sees_the_package() -> None:
    assert len(MODULES) > 100
    assert "neutrino.engine.client" in GRAPH["neutrino.pipeline.orchestrator"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ".frontends." in m))
def test_front_ends_do_not_import_the_engine_package(module: str) -> None:
    bad = sorted(t for t in GRAPH[module] if t.startswith("neutrino.engine"))
    assert not bad, f"{module} imports {bad}: go through neutrino.pipeline"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ".pipeline." in m))
def test_the_pipeline_sees_engines_only_through_the_seam(module: str) -> None:
    allowed = {"neutrino.engine.client", "neutrino.engine.messages"}
    bad = sorted(t for t in GRAPH[module] if t.startswith("neutrino.engine") and t not in allowed)
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ".frontends.grpc" in m))
def test_grpc_does_not_import_another_front_end(module: str) -> None:
    """gRPC translates its messages into the pipeline's types itself: it neither builds
    nor parses another protocol's body (HTTP/3 may share the HTTP API's routes: it is
    the same API on another transport)."""
    bad = sorted(
        t
        for t in GRAPH[module]
        if t.startswith(("neutrino.frontends.http", "neutrino.frontends.params"))
    )
    assert not bad, f"{module} imports {bad}"


# What each lower layer may import besides itself (and the standard library).
LOWER = {
    # Tokenizers, templates, stops, parsers: text in, text out; nothing of a request.
    "neutrino.text": {"neutrino.resources"},
    # The frozen configuration, loaded once; it reads a tokenizer file's type only.
    "neutrino.config": {"neutrino.resources", "neutrino.text"},
    # Metrics, traces, logs: fed by the pipeline, never reaching into it.
    "neutrino.observability": {"neutrino.config", "neutrino.errors", "neutrino.resources"},
    # The engine client side (wire, link, routing, upstreams, the engines it starts): it
    # never reaches up into an engine's own side (neutrino.engines) or the supervisor.
    "neutrino.engine": {
        "neutrino.backoff",
        "neutrino.config",
        "neutrino.errors",
        "neutrino.lifeline",
        "neutrino.resources",
        "neutrino.restarts",
        "neutrino.sse_decoder",
        "neutrino.text",
    },
    # Restart policy and backoff: plain arithmetic, shared by supervisor and engine side.
    "neutrino.restarts": {"neutrino.backoff"},
}


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if any(m.startswith(f"{p}.") or m == p for p in LOWER))
)
def test_lower_layers_import_only_below_them(module: str) -> None:
    layer = next(p for p in LOWER if module == p or module.startswith(f"{p}."))
    allowed = (layer, *LOWER[layer])
    # "neutrino" itself: the package's __init__ (its version), which imports nothing.
    bad = sorted(
        t
        for t in GRAPH[module]
        if t != "neutrino" and not any(t == a or t.startswith(f"{a}.") for a in allowed)
    )
    assert not bad, f"{module} ({layer}) imports {bad}"


def _cycles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    if graph is None:
        graph = GRAPH
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_no_cycles_even_among_type_only_imports() -> None:
    """A module that needs another's type only for annotations names a narrow Protocol of
    its own rather than importing a module that imports it (app -> instance -> app)."""
    typed = {m: set(_imports(m, typing_too=True)) for m in MODULES}
    assert _cycles(typed) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    GRAPH["neutrino.errors"].add("neutrino.config")
    GRAPH["neutrino.config"].add("neutrino.errors")
    try:
        assert any({"neutrino.errors", "neutrino.config"} <= set(c) for c in _cycles())
    finally:
        GRAPH["neutrino.errors"] = set(_imports("neutrino.errors"))
        GRAPH["neutrino.config"] = set(_imports("neutrino.config"))
