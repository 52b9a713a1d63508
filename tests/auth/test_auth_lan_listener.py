"""The real UvicornShareListener, bound to 127.0.0.1, serving the real app."""

from __future__ import annotations

import socket

import httpx
import pytest
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings
from gateway.lan_share import UvicornShareListener, primary_lan_ipv4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_share_listener_serves_the_app_with_its_lifespan_state(leak_guard) -> None:
    port = free_port()
    settings = Settings(engines=(), share_host="127.0.0.1", share_port=port)
    app = create_app(settings, share_listener=UvicornShareListener(settings))
    with TestClient(app, client=("127.0.0.1", 50000)) as c:
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
        settings = Settings(engines=(), share_host="127.0.0.1", share_port=port)
        app = create_app(settings, share_listener=UvicornShareListener(settings))
        with TestClient(app, client=("127.0.0.1", 50000)) as c:
            r = c.post("/v1/admin/share")
    assert (r.status_code, r.json()) == (503, {"detail": "LAN sharing could not start its listener: Address already in use"})


def test_primary_lan_address_is_an_ipv4_address() -> None:
    address = primary_lan_ipv4()
    assert socket.inet_aton(address) and address.count(".") == 3
