"""The share listener's certificate: the startup check of a supplied pair, and the
pair made and kept in the data dir (gateway/share_tls.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.config import ConfigError, Settings
from gateway.share_tls import NO_OPENSSL, ShareCertificates, fingerprint_sha256
from tests.support.tls import make_pair, needs_openssl


@pytest.mark.parametrize(("given", "missing", "index"), [("VOXGATE_SHARE_CERT", "VOXGATE_SHARE_KEY", 0),
                                                        ("VOXGATE_SHARE_KEY", "VOXGATE_SHARE_CERT", 1)])
def test_one_half_of_the_pair_is_refused_at_startup(tmp_path: Path, given: str, missing: str, index: int) -> None:
    pair = make_pair(tmp_path, "IP:127.0.0.1")
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({given: str(pair[index])})
    assert str(refused.value) == (f"{given} is set but {missing} is not: "
                                  "set both (the certificate and its private key) or neither")


@pytest.mark.parametrize(("missing", "variable"), [("share_cert", "VOXGATE_SHARE_CERT"),
                                                  ("share_key", "VOXGATE_SHARE_KEY")])
def test_a_missing_file_of_the_pair_is_named(tmp_path: Path, missing: str, variable: str) -> None:
    cert, key = make_pair(tmp_path, "IP:127.0.0.1")
    absent = tmp_path / "absent.pem"
    with pytest.raises(ConfigError) as refused:
        Settings(**{"share_cert": cert, "share_key": key, missing: absent})
    assert str(refused.value) == f"{variable}={str(absent)!r}: cannot read it (No such file or directory)"


def test_a_certificate_file_that_is_no_pem_is_named(tmp_path: Path) -> None:
    _, key = make_pair(tmp_path, "IP:127.0.0.1")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError) as refused:
        Settings(share_cert=junk, share_key=key)
    assert str(refused.value) == f"VOXGATE_SHARE_CERT={str(junk)!r} holds no PEM certificate"


def test_a_key_of_another_certificate_is_refused(tmp_path: Path) -> None:
    cert, _ = make_pair(tmp_path, "IP:127.0.0.1", name="one")
    _, other_key = make_pair(tmp_path, "IP:127.0.0.1", name="two")
    with pytest.raises(ConfigError) as refused:
        Settings(share_cert=cert, share_key=other_key)
    assert str(refused.value) == (f"VOXGATE_SHARE_KEY={str(other_key)!r} does not load as the private key of "
                                  f"VOXGATE_SHARE_CERT={str(cert)!r} (KEY_VALUES_MISMATCH)")


def test_a_matching_pair_is_accepted_and_served_as_supplied(tmp_path: Path) -> None:
    cert, key = make_pair(tmp_path, "DNS:voxgate.lan")
    settings = Settings.from_env({"VOXGATE_SHARE_CERT": str(cert), "VOXGATE_SHARE_KEY": str(key),
                                  "VOXGATE_DATA_DIR": str(tmp_path / "data")})
    assert (settings.share_cert, settings.share_key) == (cert, key)
    pair = ShareCertificates(settings.data_dir, (cert, key)).for_host("192.0.2.7")
    assert (pair.cert, pair.key, pair.fingerprint) == (cert, key, fingerprint_sha256(cert))
    assert not (tmp_path / "data").exists()  # nothing made when the admin supplies the pair


def test_the_made_pair_is_private_kept_and_renewed_for_a_new_address(tmp_path: Path) -> None:
    needs_openssl()
    certificates = ShareCertificates(tmp_path)
    first = certificates.for_host("192.0.2.7")
    assert stat.S_IMODE(first.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(certificates.directory.stat().st_mode) == 0o700
    assert [p.name for p in sorted(certificates.directory.iterdir())] == ["cert.pem", "key.pem"]
    assert ShareCertificates(tmp_path).for_host("192.0.2.7") == first  # a later start (a restart) reuses it
    moved = ShareCertificates(tmp_path).for_host("192.0.2.8")  # the address is not among its names
    assert moved.fingerprint != first.fingerprint
    assert stat.S_IMODE(moved.key.stat().st_mode) == 0o600


def test_a_pair_that_no_longer_loads_is_made_again(tmp_path: Path) -> None:
    needs_openssl()
    certificates = ShareCertificates(tmp_path)
    first = certificates.for_host("192.0.2.7")
    first.key.write_text("truncated\n")
    again = certificates.for_host("192.0.2.7")
    assert again.fingerprint != first.fingerprint


def test_without_openssl_sharing_says_how_to_get_a_certificate(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no openssl on it
    with pytest.raises(OSError) as refused:
        ShareCertificates(tmp_path).for_host("192.0.2.7")
    assert str(refused.value) == NO_OPENSSL == (
        "LAN sharing serves HTTPS and no certificate was supplied: install the openssl command "
        "(it makes a self-signed certificate), or set VOXGATE_SHARE_CERT and VOXGATE_SHARE_KEY")


def test_serve_refuses_to_start_with_a_one_sided_setting(tmp_path: Path, capsys, monkeypatch) -> None:
    cert, _ = make_pair(tmp_path, "IP:127.0.0.1")
    monkeypatch.delenv("VOXGATE_SHARE_KEY", raising=False)
    monkeypatch.setenv("VOXGATE_SHARE_CERT", str(cert))
    assert main(["serve", "--engines", "none", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("voxgate: configuration error: VOXGATE_SHARE_CERT is set but VOXGATE_SHARE_KEY "
                                       "is not: set both (the certificate and its private key) or neither\n")
