"""The real UvicornShareListener, bound to 127.0.0.1, serving the real app over HTTPS."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings
from gateway.lan_share import UvicornShareListener, primary_lan_ipv4
from gateway.share_tls import NO_OPENSSL, fingerprint_sha256
from tests.support.hosts import TEST_HOST
from tests.support.net import free_port
from tests.support.tls import make_pair, needs_openssl, served_fingerprint, trusting


def share_client(port: int, data_dir: Path, **options: Any) -> TestClient:
    """A loopback client of the app whose real share listener binds 127.0.0.1:``port``
    (a certificate it makes is kept in ``data_dir``)."""
    settings = Settings(engines=(), allowed_hosts=(TEST_HOST,), share_host="127.0.0.1", share_port=port,
                        data_dir=data_dir, **options)
    return TestClient(create_app(settings, share_listener=UvicornShareListener(settings)), client=("127.0.0.1", 50000))


@pytest.mark.slow
def test_share_listener_serves_the_app_over_https_with_its_lifespan_state(leak_guard, tmp_path: Path) -> None:
    needs_openssl()
    port = free_port()
    with share_client(port, tmp_path) as c:
        r = c.post("/v1/admin/share")
        assert r.status_code == 201
        body = r.json()
        leak_guard.append(body["pin"])
        cert = tmp_path / "share-tls" / "cert.pem"  # made at this first use, kept in the data dir
        assert body == {"pin": body["pin"], "url": f"https://127.0.0.1:{port}/?pin={body['pin']}", "port": port,
                        "fingerprint": fingerprint_sha256(cert)}
        assert served_fingerprint("127.0.0.1", port) == body["fingerprint"]
        # A real TLS socket, the certificate verified for the address (its subject alt name): the auth
        # middleware runs and the routes see the main lifespan state.
        shared = httpx.get(f"https://127.0.0.1:{port}/v1/admin/sessions", verify=trusting(cert), timeout=5)
        assert (shared.status_code, shared.json()) == (200, {"sessions": []})
        with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP gets no page from a TLS listener
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
        again = c.post("/v1/admin/share")  # a new PIN on the same running listener
        leak_guard.append(again.json()["pin"])
        assert (again.json()["port"], again.json()["fingerprint"]) == (port, body["fingerprint"])
        assert c.request("DELETE", "/v1/admin/share").status_code == 204
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"https://127.0.0.1:{port}/health", verify=trusting(cert), timeout=5)


@pytest.mark.slow
def test_the_made_certificate_survives_a_restart(leak_guard, tmp_path: Path) -> None:
    needs_openssl()
    fingerprints = []
    for _ in range(2):  # two lifespans over one data dir: a restart
        port = free_port()
        with share_client(port, tmp_path) as c:
            body = c.post("/v1/admin/share").json()
            leak_guard.append(body["pin"])
            assert served_fingerprint("127.0.0.1", port) == body["fingerprint"]
            fingerprints.append(body["fingerprint"])
    assert fingerprints[0] == fingerprints[1]


@pytest.mark.slow
def test_a_supplied_certificate_is_served(leak_guard, tmp_path: Path) -> None:
    cert, key = make_pair(tmp_path, "IP:127.0.0.1")
    port = free_port()
    with share_client(port, tmp_path / "data", share_cert=cert, share_key=key) as c:
        body = c.post("/v1/admin/share").json()
        leak_guard.append(body["pin"])
        assert body["fingerprint"] == served_fingerprint("127.0.0.1", port) == fingerprint_sha256(cert)
        r = httpx.get(f"https://127.0.0.1:{port}/health", verify=trusting(cert), timeout=5)
        assert r.status_code == 200
    assert not (tmp_path / "data" / "share-tls").exists()


@pytest.mark.slow
def test_without_a_certificate_sharing_is_a_clear_503(leak_guard, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no openssl to make one, none supplied
    with share_client(free_port(), tmp_path) as c:
        r = c.post("/v1/admin/share")
    assert (r.status_code, r.json()) == (503, {"detail": f"LAN sharing could not start its listener: {NO_OPENSSL}",
                                               "code": "share_unavailable"})


@pytest.mark.slow
def test_busy_port_is_a_clear_503(leak_guard, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with share_client(port, tmp_path) as c:
            r = c.post("/v1/admin/share")
    assert (r.status_code, r.json()) == (503, {"detail": "LAN sharing could not start its listener: Address already in use", "code": "share_unavailable"})


@pytest.mark.slow
def test_stopping_sharing_through_the_share_listener_itself(leak_guard, tmp_path: Path) -> None:
    # The DELETE is served by the listener it stops: the answer must not wait for it.
    port = free_port()
    with share_client(port, tmp_path) as c:
        leak_guard.append(c.post("/v1/admin/share").json()["pin"])
        r = httpx.delete(f"https://127.0.0.1:{port}/v1/admin/share", verify=False, timeout=5)
        assert r.status_code == 204
        assert c.get("/v1/admin/share").json() == {"enabled": False, "url": None, "port": None, "fingerprint": None}
        c.portal.call(c.app_state["auth"].share.wait_stopped)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"https://127.0.0.1:{port}/health", verify=False, timeout=5)


def test_primary_lan_address_is_a_routable_ipv4_address_or_none() -> None:
    address = primary_lan_ipv4()
    if address is not None:
        ip = ipaddress.ip_address(address)
        assert ip.version == 4 and not ip.is_loopback and not ip.is_unspecified
