"""Which browser requests may reach an open server's admin routes (browsers.py)."""

from __future__ import annotations

import pytest

from neutrino.frontends.http.browsers import foreign_origin, is_json, preflighted


@pytest.mark.parametrize(
    ("origin", "host", "allowed", "foreign"),
    [
        (None, "127.0.0.1:51055", (), False),  # not a browser (or a same-origin GET)
        ("http://127.0.0.1:51055", "127.0.0.1:51055", (), False),
        ("HTTP://LocalHost:8080", "localhost:8080", (), False),
        ("http://localhost", "localhost:80", (), False),  # the scheme's default port
        ("https://ops.example", "ops.example:443", (), False),
        ("https://ops.example", "ops.example:80", (), True),
        ("http://evil.example", "127.0.0.1:51055", (), True),
        ("http://127.0.0.1:9999", "127.0.0.1:51055", (), True),  # another port: another origin
        ("null", "127.0.0.1:51055", (), True),  # sandboxed frames, file:// pages
        ("http://evil.example", "", (), True),
        ("http://ops.example:3000", "x:1", ("http://ops.example:3000",), False),
        ("http://evil.example", "x:1", ("*",), False),
    ],
)
def test_foreign_origin(
    origin: str | None, host: str, allowed: tuple[str, ...], foreign: bool
) -> None:
    assert (foreign_origin(origin, host, allowed) is not None) is foreign


def test_what_a_page_cannot_send_unasked() -> None:
    assert is_json("application/json; charset=utf-8") and is_json("application/merge-patch+json")
    for simple in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        assert not preflighted(simple, None)
    assert preflighted(None, "XMLHttpRequest") and preflighted("application/json", None)
