"""The documentation: the site builds with ``mkdocs build --strict`` (no broken link or
anchor); its two references are tools/docs_reference.py's output and name every key and
series the code defines, and a live server exports no series they miss; every Python
example in the README and the site runs as written (with the project's Python) against a
real server; the worked engine example serves a chat behind Neutrino; and what the pages
say of limits agrees with the code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client.parser import text_string_to_metric_families

from neutrino.config import LimitsConfig
from tests.support.procs import MockIE, NeutrinoProc, free_port, free_udp_port
from tests.support.tools import load_tool

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
TEXT = {p: p.read_text(encoding="utf-8") for p in PAGES}
# The Python examples: fenced blocks, not those that include a file (the engine example,
# run below as the engine it is).
EXAMPLES = [
    (p.relative_to(REPO).as_posix(), code)
    for p, text in TEXT.items()
    for code in re.findall(r"```python\n(.*?)```", text, re.S)
    if not code.lstrip().startswith("--8<--")
]


def _generator() -> ModuleType:
    return load_tool("docs_reference")


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").is_file()
    assert (tmp_path / "site" / "engine-protocol" / "index.html").is_file()
    built = (tmp_path / "site" / "engine-protocol" / "index.html").read_text()
    assert "EchoHandler" in built and "hello_ack" in built  # the example file, included


def test_every_page_is_in_the_navigation() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        assert page.relative_to(DOCS).as_posix() in nav, page


def test_the_references_are_the_generators_output() -> None:
    for name, text in _generator().pages().items():
        assert (DOCS / "reference" / name).read_text(encoding="utf-8") == text, name


def test_the_configuration_reference_names_every_key() -> None:
    from neutrino import config as cfg
    from neutrino.config import engines as engine_section
    from neutrino.config import routes, routing

    page = (DOCS / "reference" / "configuration.md").read_text()
    gen = _generator()
    headers = [h for h, _ in gen.sections()]
    assert {f"[{s}]" for s in cfg._SECTIONS} <= set(headers)
    assert {"[[engines]]", "[auth]", "[[auth.keys]]", "[routing]", "[[routes]]"} <= set(headers)
    for header in headers:
        assert f"## `{header}`" in page
    for name, cls in cfg._SECTIONS.items():
        section = page.split(f"## `[{name}]`", 1)[1].split("\n## ", 1)[0]
        for f in fields(cls):
            assert f"| `{f.name}` |" in section, (name, f.name)
    engines = page.split("## `[[engines]]`", 1)[1].split("\n## ", 1)[0]
    assert all(f"| `{k}` |" in engines for k in engine_section.ENGINE_KEYS)
    assert all(
        f"| `{f.name}` |" in page for f in fields(routing.RoutingConfig) if f.name != "models"
    )
    assert all(f"| `{f.name}` |" in page for f in fields(routes.RouteConfig))
    for action in cfg.parser()._actions:
        for flag in action.option_strings:
            if action.help != "==SUPPRESS==":
                assert f"`{flag}`" in page, flag


def test_a_live_servers_series_are_all_in_the_metrics_reference(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    page = (DOCS / "reference" / "metrics.md").read_text()
    port = free_port()
    server = neutrino_factory(
        "--engine", mock_factory().socket, "--metrics-address", f"127.0.0.1:{port}"
    )
    body = {
        "model": "qwen2.5-mock",
        "max_tokens": 3,
        "messages": [{"role": "user", "content": "hi"}],
    }
    req = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    names = {fam.name for fam in text_string_to_metric_families(text)}
    ours = {n for n in names if n.startswith("neutrino_")}
    assert len(ours) > 30
    for name in ours:
        counter = f"`{name}_total`" in page
        assert f"`{name}`" in page or counter, name
    assert "`process_*`" in page and any(n.startswith("process_") for n in names)
    for fam in _generator().metric_families():
        assert f"`{fam[0]}`" in page


def test_the_docs_have_their_python_examples() -> None:
    assert len(EXAMPLES) >= 6
    assert any("openai" in code for _, code in EXAMPLES)
    assert any("grpc" in code for _, code in EXAMPLES)


@pytest.mark.parametrize(
    "index", range(len(EXAMPLES)), ids=[f"{p}#{i}" for i, (p, _) in enumerate(EXAMPLES)]
)
def test_each_python_example_runs(
    index: int,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    grpc_port, quic_port = free_port(), free_udp_port()
    server = neutrino_factory(
        "--engine", mock_factory().socket,
        "--grpc-address", f"127.0.0.1:{grpc_port}",
        "--quic-address", f"127.0.0.1:{quic_port}",
    )  # fmt: skip
    code = EXAMPLES[index][1].replace("51055", str(server.port)).replace("50051", str(grpc_port))
    code = code.replace("51056", str(quic_port))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the example printed nothing"


def test_the_worked_engine_serves_a_chat_behind_neutrino(
    tmp_path: Path, neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    sock = tmp_path / "echo.sock"
    engine = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "echo_engine.py"), "--socket", str(sock)],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert engine.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        server = neutrino_factory("--engine", str(sock))
        import openai

        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        done = client.chat.completions.create(
            model="echo", max_tokens=8,
            messages=[{"role": "user", "content": "the quick brown fox jumps"}],
        )  # fmt: skip
        assert "brown fox jumps" in (done.choices[0].message.content or "")
        assert done.choices[0].finish_reason == "length" and done.usage is not None
        assert done.usage.completion_tokens == 8
        parts = [
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="echo",
                max_tokens=8,
                stream=True,
                messages=[{"role": "user", "content": "the quick brown fox jumps"}],
            )
            if c.choices
        ]
        assert "".join(parts) == done.choices[0].message.content
    finally:
        engine.terminate()
        engine.wait(10)


def _said(pattern: str) -> list[str]:
    return [m for text in TEXT.values() for m in re.findall(pattern, text)]


def test_what_the_docs_say_of_n_agrees_with_the_code() -> None:
    assert _said(r"`n` \(up to (\d+)") == [str(LimitsConfig().max_n)]
    assert not _said(r"`n` \(1\)")


def test_the_docs_say_which_python_runs_the_examples() -> None:
    grpc_example = next(code for _, code in EXAMPLES if "grpc" in code)
    assert ".venv/bin/python" in grpc_example
    assert ".venv/bin/python" in TEXT[REPO / "README.md"] + TEXT[DOCS / "getting-started.md"]
