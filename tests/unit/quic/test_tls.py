"""The HTTP/3 certificate: the self-signed pair kept in its private folder, and
configured files."""

from __future__ import annotations

import hashlib
import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from neutrino.errors import StartupError
from neutrino.frontends.quic import tls


def _sans(creds: tls.Credentials) -> set[object]:
    ext = creds.chain[0].extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return set(ext.value)


def test_self_signed_pair_is_made_once_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "state" / "tls"
    first = tls.load("", "", str(folder), "127.0.0.1")
    assert first.self_signed and Path(first.source).parent == folder
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "selfsigned-key.pem").stat().st_mode & 0o777 == 0o600
    der = first.chain[0].public_bytes(Encoding.DER)
    assert first.fingerprint.replace(":", "") == hashlib.sha256(der).hexdigest().upper()
    again = tls.load("", "", str(folder), "127.0.0.1")
    assert again.fingerprint == first.fingerprint  # the same across restarts and workers
    assert x509.IPAddress(ipaddress.ip_address("127.0.0.1")) in _sans(first)
    assert x509.DNSName("localhost") in _sans(first)


def test_a_new_host_gets_a_new_certificate(tmp_path: Path) -> None:
    first = tls.load("", "", str(tmp_path), "127.0.0.1")
    other = tls.load("", "", str(tmp_path), "llm.example")
    assert other.fingerprint != first.fingerprint
    assert x509.DNSName("llm.example") in _sans(other)


def test_configured_files_are_used(tmp_path: Path) -> None:
    made = tls.load("", "", str(tmp_path / "made"), "localhost")
    cert, key = Path(made.source), Path(made.source).with_name("selfsigned-key.pem")
    used = tls.load(str(cert), str(key), "", "localhost")
    assert not used.self_signed and used.fingerprint == made.fingerprint


@pytest.mark.parametrize(
    ("cert", "key", "words"),
    [
        ("a.pem", "", "go together"),
        ("missing.pem", "missing-key.pem", "cannot read"),
        ("bad.pem", "bad.pem", "not valid PEM"),
    ],
)
def test_bad_certificate_settings_are_startup_errors(
    tmp_path: Path, cert: str, key: str, words: str
) -> None:
    (tmp_path / "bad.pem").write_text("not a certificate")
    with pytest.raises(StartupError) as caught:
        tls.load(str(tmp_path / cert) if cert else "", str(tmp_path / key) if key else "", "", "h")
    assert words in str(caught.value)


def test_a_folder_that_cannot_be_made_is_a_startup_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StartupError, match="tls_dir"):
        tls.load("", "", str(blocker / "tls"), "localhost")


def test_default_folder_that_cannot_be_made_falls_back_to_this_run_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(tls, "DEFAULT_DIR", blocker / "tls")
    creds = tls.load("", "", "", "localhost")
    assert creds.self_signed and creds.source == "memory, this run only"
    assert "this run only" in caplog.text
