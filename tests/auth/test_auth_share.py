"""LAN sharing through the admin routes, with a fake listener."""

from __future__ import annotations

import errno
import re

from auth import AuthConfig
from tests.auth.auth_harness import KEY


def test_enabling_sharing_returns_pin_url_and_port(harness) -> None:
    h = harness(AuthConfig())
    r = h.local.post("/v1/admin/share")
    assert r.status_code == 201
    body = r.json()
    h.secrets.append(body["pin"])
    assert re.fullmatch(r"[0-9]{6}", body["pin"])
    assert body == {"pin": body["pin"], "url": f"http://192.0.2.10:8001/?pin={body['pin']}", "port": 8001,
                    "fingerprint": None}
    assert h.listener.running and h.listener.starts == 1


def test_listener_serves_the_whole_app(harness) -> None:
    h = harness(AuthConfig())
    h.enable_pin()
    # The app handed over is the one the request came through, middleware included.
    assert h.listener.app is h.local.app


def test_every_enable_draws_a_new_pin_and_kills_the_old_one(harness) -> None:
    h = harness(AuthConfig())
    first = h.enable_pin()
    second = h.enable_pin()
    assert h.remote.get("/consume", headers={"X-Voxgate-Pin": second}).status_code == 200
    if first != second:  # one chance in 10^6 that they are equal
        r = h.remote.get("/consume", headers={"X-Voxgate-Pin": first})
        assert (r.status_code, r.json()) == (401, {"detail": "PIN required", "code": "pin_required"})


def test_status_shows_the_pin_to_admins(harness) -> None:
    h = harness(AuthConfig())
    assert h.local.get("/v1/admin/share").json() == {"enabled": False, "url": None, "port": None,
                                                          "fingerprint": None}
    pin = h.enable_pin()
    assert h.local.get("/v1/admin/share").json() == {
        "enabled": True, "url": f"http://192.0.2.10:8001/?pin={pin}", "port": 8001, "pin": pin, "fingerprint": None}


def test_a_tls_listener_makes_the_link_https_and_carries_its_fingerprint(harness) -> None:
    h = harness(AuthConfig())
    fingerprint = ":".join(["AB"] * 32)
    h.listener.tls_fingerprint = fingerprint
    body = h.local.post("/v1/admin/share").json()
    h.secrets.append(body["pin"])
    assert body == {"pin": body["pin"], "url": f"https://192.0.2.10:8001/?pin={body['pin']}", "port": 8001,
                    "fingerprint": fingerprint}
    assert h.local.get("/v1/admin/share").json() == {
        "enabled": True, "url": f"https://192.0.2.10:8001/?pin={body['pin']}", "port": 8001, "pin": body["pin"],
        "fingerprint": fingerprint}


def test_status_is_admin_only(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    r = h.remote.get("/v1/admin/share", headers={"X-Voxgate-Pin": pin})
    assert (r.status_code, r.json()) == (403, {"detail": "loopback origin required", "code": "loopback_required"})


def test_disabling_sharing_kills_the_pin_and_stops_the_listener(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    r = h.local.request("DELETE", "/v1/admin/share")
    assert (r.status_code, r.content) == (204, b"")
    assert (h.listener.running, h.listener.stops) == (False, 1)
    r = h.remote.get("/consume", headers={"X-Voxgate-Pin": pin})
    assert (r.status_code, r.json()) == (403, {"detail": "loopback origin required", "code": "loopback_required"})


def test_server_mode_admin_key_may_share_remotely(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    r = h.remote.post("/v1/admin/share", headers={"X-API-Key": KEY})
    assert r.status_code == 201
    h.secrets.append(r.json()["pin"])


def test_local_mode_key_may_not_share_remotely(harness) -> None:
    h = harness(AuthConfig(api_key=KEY))
    r = h.remote.post("/v1/admin/share", headers={"X-API-Key": KEY})
    assert (r.status_code, r.json()) == (403, {"detail": "loopback origin required", "code": "loopback_required"})


def test_listener_that_cannot_bind_is_503_and_no_pin_exists(harness) -> None:
    h = harness(AuthConfig())
    h.listener.fail_with = OSError(errno.EADDRINUSE, "Address already in use")
    r = h.local.post("/v1/admin/share")
    assert (r.status_code, r.json()) == (503, {"detail": "LAN sharing could not start its listener: Address already in use", "code": "share_unavailable"})
    assert h.local.get("/v1/admin/share").json()["enabled"] is False


def test_closing_the_state_stops_sharing(harness) -> None:
    h = harness(AuthConfig())
    h.enable_pin()
    h.local.portal.call(h.state.aclose)
    assert h.listener.running is False
    assert h.local.portal.call(h.state.share.current) is None
