"""The HTTP/3 listener's certificate: the configured one, or a self-signed one.

``[server] tls_cert`` and ``tls_key`` name PEM files. Without them, a self-signed
certificate (ECDSA P-256, for localhost, 127.0.0.1, ::1 and the listener's host) is made
once and kept in a private folder (``[server] tls_dir``; default
``~/.local/state/neutrino/tls``, mode 0700), so that its fingerprint stays the same across
restarts and every worker of ``--workers`` serves the same one. It is made again when it
has expired or no longer names the host. If the default folder cannot be made (a service
user without a home), a certificate made for this run only is used, with a warning.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from neutrino.errors import StartupError

log = logging.getLogger("neutrino.http")

_CERT = "selfsigned-cert.pem"
_KEY = "selfsigned-key.pem"
_VALID_DAYS = 365
_RENEW_BEFORE = datetime.timedelta(days=7)
DEFAULT_DIR = Path("~/.local/state/neutrino/tls")
# The keys TLS 1.3 (aioquic) signs with.
_KEY_TYPES = (
    ec.EllipticCurvePrivateKey,
    rsa.RSAPrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)


@dataclass(frozen=True, slots=True)
class Credentials:
    chain: list[x509.Certificate]
    key: CertificateIssuerPrivateKeyTypes
    source: str  # the certificate's file
    self_signed: bool

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the certificate (DER), as ``AB:CD:...`` (what openssl prints)."""
        return self.chain[0].fingerprint(hashes.SHA256()).hex(":").upper()


def load(cert: str, key: str, folder: str, host: str) -> Credentials:
    """The configured certificate and key, or the self-signed pair (StartupError when
    they cannot be read or made)."""
    if bool(cert) != bool(key):
        raise StartupError("[server] tls_cert and tls_key go together (set both, or neither)")
    if cert:
        return Credentials(*_read(Path(cert).expanduser(), Path(key).expanduser()), cert, False)
    if folder:
        return self_signed(Path(folder).expanduser(), host)
    try:
        return self_signed(DEFAULT_DIR.expanduser(), host)
    except StartupError as exc:  # a service user without a home: HTTP/3 still serves
        log.warning("%s; using a certificate made for this run only", exc)
        made, private = _make(host)
        return Credentials([made], private, "memory, this run only", True)


def _read(cert: Path, key: Path) -> tuple[list[x509.Certificate], CertificateIssuerPrivateKeyTypes]:
    try:
        chain = x509.load_pem_x509_certificates(cert.read_bytes())
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    except OSError as exc:
        raise StartupError(
            f"cannot read the HTTP/3 certificate or key: {exc.filename}: "
            f"{(exc.strerror or str(exc)).lower()}"
        ) from None
    except (ValueError, TypeError) as exc:
        raise StartupError(f"the HTTP/3 certificate or key is not valid PEM: {exc}") from None
    if not isinstance(private, _KEY_TYPES):
        raise StartupError("the HTTP/3 key must be an EC, RSA, Ed25519 or Ed448 key")
    if not chain:
        raise StartupError(f"no certificate in {cert}")
    return chain, private


def self_signed(folder: Path, host: str) -> Credentials:
    """The folder's self-signed pair, made first if missing, expired or not for ``host``
    (under a lock: workers starting together make one)."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
        with open(folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            cert, key = folder / _CERT, folder / _KEY
            if cert.exists() and key.exists():
                chain, private = _read(cert, key)
                if _still_good(chain[0], host):
                    return Credentials(chain, private, str(cert), True)
            made, private = _make(host)
            _write(key, private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ))  # fmt: skip
            _write(cert, made.public_bytes(serialization.Encoding.PEM))
            return Credentials([made], private, str(cert), True)
    except OSError as exc:
        raise StartupError(
            f"cannot keep the HTTP/3 self-signed certificate in {folder}: "
            f"{(exc.strerror or str(exc)).lower()} (set [server] tls_dir, or tls_cert and "
            "tls_key)"
        ) from None


def _names(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    ips = {"127.0.0.1", "::1"}
    try:
        ipaddress.ip_address(host)
        ips.add(host)
    except ValueError:
        if host and host != "localhost":
            names.append(x509.DNSName(host))
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    return names


def _still_good(cert: x509.Certificate, host: str) -> bool:
    now = datetime.datetime.now(datetime.UTC)
    if cert.not_valid_after_utc - _RENEW_BEFORE < now:
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(_names(host)) <= set(san)


def _make(host: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "neutrino (self-signed)")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _write(path: Path, data: bytes) -> None:
    """Write a file atomically, readable by this user only."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
