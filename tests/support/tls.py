"""TLS pieces made at test time: a certificate pair (the ``openssl`` command) and
the fingerprint of the certificate a live listener serves."""

from __future__ import annotations

import hashlib
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


def needs_openssl() -> None:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")


def make_pair(directory: Path, san: str, name: str = "supplied") -> tuple[Path, Path]:
    """A self-signed certificate for ``san`` (e.g. ``IP:127.0.0.1``) and its key, in ``directory``."""
    needs_openssl()
    cert, key = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=30)
    return cert, key


def sha256_colons(der: bytes) -> str:
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def served_fingerprint(host: str, port: int) -> str:
    """The SHA-256 fingerprint of the certificate served at ``host:port`` (not verified: it is compared)."""
    pem = ssl.get_server_certificate((host, port), timeout=5)
    return sha256_colons(ssl.PEM_cert_to_DER_cert(pem))


def trusting(cert: Path) -> ssl.SSLContext:
    """A client context that trusts ``cert`` alone, host name (IP) checked."""
    return ssl.create_default_context(cafile=str(cert))
