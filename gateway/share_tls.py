"""The LAN-share listener's TLS certificate: the admin's, or one made here at first use.

A phone's browser opens the microphone only on a secure origin, so the share
listener serves HTTPS. With ``VOXGATE_SHARE_CERT`` and ``VOXGATE_SHARE_KEY`` set
it serves that pair, checked once at startup (``supplied_pair_problem``).
Otherwise the first start of sharing makes a self-signed certificate with the
``openssl`` command (the gateway carries no crypto package of its own) and keeps
it in ``<data_dir>/share-tls/`` (directory 0700, key file 0600). Later starts,
across restarts too, serve the same one, so a phone that accepted it once is not
asked again; a new one is made only when the listening address is not among its
subject alt names, when it expires within ``RENEW_BEFORE_S``, or when the pair
no longer loads.

Blocking (files and a subprocess): call ``ShareCertificates.for_host`` off the
event loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import re
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CERT_ENV = "VOXGATE_SHARE_CERT"
KEY_ENV = "VOXGATE_SHARE_KEY"
TLS_DIR_NAME = "share-tls"
CERT_FILE = "cert.pem"
KEY_FILE = "key.pem"
VALID_DAYS = 825  # the longest validity Apple's platforms accept for a TLS server certificate
RENEW_BEFORE_S = 30 * 24 * 3600
OPENSSL_TIMEOUT_S = 30.0
SUBJECT = "/CN=voxgate LAN share"
NO_OPENSSL = (f"LAN sharing serves HTTPS and no certificate was supplied: install the openssl command "
              f"(it makes a self-signed certificate), or set {CERT_ENV} and {KEY_ENV}")
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


@dataclass(frozen=True)
class TlsPair:
    cert: Path
    key: Path
    fingerprint: str  # SHA-256 of the (first) certificate's DER bytes, colon-separated hex


def fingerprint_sha256(cert_path: Path) -> str:
    """The SHA-256 fingerprint of the first certificate in a PEM file, as browsers show it."""
    match = _PEM_CERT.search(cert_path.read_text(encoding="ascii", errors="replace"))
    if match is None:
        raise ValueError(f"{cert_path} holds no PEM certificate")
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(match.group(0))).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def _load_problem(cert: Path, key: Path) -> str | None:
    """Why ``cert`` and ``key`` do not load as one TLS server pair, or None."""
    try:
        fingerprint_sha256(cert)
    except OSError as exc:
        return f"{CERT_ENV}={str(cert)!r}: cannot read it ({exc.strerror or exc})"
    except ValueError:
        return f"{CERT_ENV}={str(cert)!r} holds no PEM certificate"
    try:
        key.read_bytes()
    except OSError as exc:
        return f"{KEY_ENV}={str(key)!r}: cannot read it ({exc.strerror or exc})"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        return (f"{KEY_ENV}={str(key)!r} does not load as the private key of {CERT_ENV}={str(cert)!r} "
                f"({exc.reason or exc})")
    return None


def supplied_pair_problem(cert: Path | None, key: Path | None) -> str | None:
    """Why the admin's certificate settings cannot be served, naming the variable; None when
    both are unset or both load as one pair."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        have, missing = (CERT_ENV, KEY_ENV) if cert is not None else (KEY_ENV, CERT_ENV)
        return f"{have} is set but {missing} is not: set both (the certificate and its private key) or neither"
    return _load_problem(cert, key)


class ShareCertificates:
    """The pair the share listener serves: the supplied one, or the one kept under ``data_dir``."""

    def __init__(self, data_dir: Path, supplied: tuple[Path, Path] | None = None) -> None:
        self.directory = data_dir / TLS_DIR_NAME
        self._supplied = supplied

    def for_host(self, host: str) -> TlsPair:
        """The pair to serve on ``host``. Raises OSError (its message safe to show) when
        no certificate can be had."""
        if self._supplied is not None:
            cert, key = self._supplied
        else:
            cert, key = self.directory / CERT_FILE, self.directory / KEY_FILE
            if not self._usable(cert, key, host):
                self._generate(host)
        try:
            return TlsPair(cert, key, fingerprint_sha256(cert))
        except ValueError as exc:  # replaced by something else since startup checked it
            raise OSError(str(exc)) from None

    def _usable(self, cert: Path, key: Path, host: str) -> bool:
        if not (cert.is_file() and key.is_file()) or _load_problem(cert, key) is not None:
            return False
        try:
            shown = _openssl("x509", "-in", str(cert), "-noout", "-checkend", str(RENEW_BEFORE_S),
                             "-ext", "subjectAltName", check=False)
        except OSError:  # no openssl to look inside: what loads is served as it is
            return True
        return shown.returncode == 0 and _san_entry(host) in _san_entries(shown.stdout)

    def _generate(self, host: str) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".new-", dir=self.directory))  # 0700: the key is never readable
        try:
            _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-sha256", "-days", str(VALID_DAYS), "-subj", SUBJECT,
                     "-addext", f"subjectAltName={_san_entry(host)}",
                     "-addext", "basicConstraints=critical,CA:FALSE",
                     "-addext", "extendedKeyUsage=serverAuth",
                     "-keyout", str(work / KEY_FILE), "-out", str(work / CERT_FILE))
            os.chmod(work / KEY_FILE, 0o600)
            os.replace(work / KEY_FILE, self.directory / KEY_FILE)
            os.replace(work / CERT_FILE, self.directory / CERT_FILE)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _san_entry(host: str) -> str:
    with contextlib.suppress(ValueError):
        return f"IP:{ipaddress.ip_address(host)}"
    return f"DNS:{host}"


def _san_entries(openssl_text: str) -> set[str]:
    """The subject alt names in ``openssl x509 -ext subjectAltName`` output, as ``_san_entry`` writes them."""
    entries: set[str] = set()
    lines = openssl_text.splitlines()
    for i, line in enumerate(lines):
        if "Subject Alternative Name" not in line or i + 1 >= len(lines):
            continue
        for item in lines[i + 1].split(","):
            kind, _, value = item.strip().partition(":")
            if kind == "IP Address":
                with contextlib.suppress(ValueError):
                    entries.add(f"IP:{ipaddress.ip_address(value)}")
            elif kind == "DNS":
                entries.add(f"DNS:{value}")
    return entries


def _openssl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("openssl")
    if binary is None:
        raise OSError(NO_OPENSSL)
    try:
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=OPENSSL_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        raise OSError(f"openssl did not finish within {OPENSSL_TIMEOUT_S:.0f} s") from None
    if check and done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise OSError(f"openssl could not make the share certificate: {last}")
    return done
