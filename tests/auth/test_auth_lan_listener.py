"""The real UvicornShareListener, bound to 127.0.0.1, serving the real app."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings
from gateway.lan_share import UvicornShareListener, primary_lan_ipv4
from tests.support.hosts import TEST_HOST
from tests.support.net import free_port


def share_client(port: int) -> TestClient:
    """A loopback client of the app whose real share listener binds 127.0.0.1:``port``."""
    settings = Settings(engines=(), allowed_hosts=(TEST_HOST,), share_host="127.0.0.1", share_port=port)
    return TestClient(create_app(settings, share_listener=UvicornShareListener(settings)), client=("127.0.0.1", 50000))


@pytest.mark.slow
def test_share_listener_serves_the_app_with_its_lifespan_state(leak_guard) -> None:
    port = free_port()
    with share_client(port) as c:
        r = c.post("/v1/admin/share")
        assert r.status_code == 201
        body = r.json()
        leak_guard.append(body["pin"])
        assert body == {"pin": body["pin"], "url": f"http://127.0.0.1:{port}/?pin={body['pin']}", "port": port}
        # A real socket: the auth middleware runs and the routes see the main lifespan state.
        shared = httpx.get(f"http://127.0.0.1:{port}/v1/admin/sessions", timeout=5)
        assert (shared.status_code, shared.json()) == (200, {"sessions": []})
        again = c.post("/v1/admin/share")  # a new PIN on the same running listener
        leak_guard.append(again.json()["pin"])
        assert again.json()["port"] == port
        assert c.request("DELETE", "/v1/admin/share").status_code == 204
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)


@pytest.mark.slow
def test_busy_port_is_a_clear_503(leak_guard) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with share_client(port) as c:
            r = c.post("/v1/admin/share")
    assert (r.status_code, r.json()) == (503, {"detail": "LAN sharing could not start its listener: Address already in use", "code": "share_unavailable"})


@pytest.mark.slow
def test_stopping_sharing_through_the_share_listener_itself(leak_guard) -> None:
    # The DELETE is served by the listener it stops: the answer must not wait for it.
    port = free_port()
    with share_client(port) as c:
        leak_guard.append(c.post("/v1/admin/share").json()["pin"])
        r = httpx.delete(f"http://127.0.0.1:{port}/v1/admin/share", timeout=5)
        assert r.status_code == 204
        assert c.get("/v1/admin/share").json() == {"enabled": False, "url": None, "port": None}
        c.portal.call(c.app_state["auth"].share.wait_stopped)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)


def test_primary_lan_address_is_a_routable_ipv4_address_or_none() -> None:
    address = primary_lan_ipv4()
    if address is not None:
        ip = ipaddress.ip_address(address)
        assert ip.version == 4 and not ip.is_loopback and not ip.is_unspecified
