"""Per-client lockout and the global PIN budget."""

from __future__ import annotations

import ipaddress

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig
from tests.auth.auth_harness import KEY, build_test_app

TOO_MANY = {"detail": "Too many authentication attempts", "code": "too_many_attempts"}
SERVER_KEY = AuthConfig(server_mode=True, api_key=KEY)
SERVER_PIN = AuthConfig(server_mode=True)


def fail(client, n: int, header: dict[str, str]) -> list[int]:
    return [client.get("/consume", headers=header).status_code for _ in range(n)]


def test_eleventh_failure_in_a_minute_gets_429_with_retry_after(harness) -> None:
    h = harness(SERVER_KEY)
    assert fail(h.remote, 10, {"X-API-Key": "wrong"}) == [401] * 10
    r = h.remote.get("/consume", headers={"X-API-Key": "wrong"})
    assert r.status_code == 429
    assert r.json() == TOO_MANY
    assert r.headers["retry-after"] == "60"
    h.clock.advance(45)
    r = h.remote.get("/consume", headers={"X-API-Key": KEY})
    assert (r.status_code, r.headers["retry-after"]) == (429, "15")


def test_lockout_refuses_even_the_right_key_until_the_window_passes(harness) -> None:
    h = harness(SERVER_KEY)
    fail(h.remote, 10, {"Authorization": "Bearer wrong"})
    assert h.remote.get("/consume", headers={"Authorization": f"Bearer {KEY}"}).status_code == 429
    h.clock.advance(60)
    r = h.remote.get("/consume", headers={"Authorization": f"Bearer {KEY}"})
    assert (r.status_code, r.json()["principal"]) == (200, "api_key")


def test_failures_older_than_the_window_do_not_count(harness) -> None:
    h = harness(SERVER_KEY)
    fail(h.remote, 9, {"X-API-Key": "wrong"})
    h.clock.advance(61)
    assert fail(h.remote, 10, {"X-API-Key": "wrong"}) == [401] * 10
    assert h.remote.get("/consume").status_code == 429


def test_during_lockout_a_correct_pin_is_not_accepted(harness) -> None:
    h = harness(SERVER_PIN)
    pin = h.enable_pin()
    wrong = "000000" if pin != "000000" else "111111"
    assert fail(h.remote, 10, {"X-Voxgate-Pin": wrong}) == [401] * 10
    r = h.remote.get("/consume", headers={"X-Voxgate-Pin": pin})
    assert (r.status_code, r.json()) == (429, TOO_MANY)
    h.clock.advance(61)
    assert h.remote.get("/consume", headers={"X-Voxgate-Pin": pin}).json()["principal"] == "pin"


def test_lockout_over_websocket_closes_1008(harness) -> None:
    h = harness(SERVER_KEY)
    fail(h.remote, 10, {"X-API-Key": "wrong"})
    with h.remote.websocket_connect(f"/v1/tts?api_key={KEY}") as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert (closed.value.code, closed.value.reason) == (1008, "Too many authentication attempts")


def test_websocket_failures_count_toward_the_lockout(harness) -> None:
    h = harness(SERVER_KEY)
    for _ in range(10):
        with h.remote.websocket_connect("/v1/dictation?api_key=wrong") as ws:
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
            assert closed.value.reason == "API key required"
    assert h.remote.get("/consume").status_code == 429


def test_lockout_is_per_client(harness) -> None:
    h = harness(SERVER_KEY)
    fail(h.remote, 10, {"X-API-Key": "wrong"})
    assert h.remote.get("/consume").status_code == 429
    assert h.trusted.get("/consume", headers={"X-API-Key": KEY}).status_code == 200


def test_session_exchange_honours_the_lockout(harness) -> None:
    h = harness(SERVER_KEY)
    for _ in range(10):
        r = h.remote.post("/v1/auth/session", headers={"Authorization": "Bearer wrong"})
        assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
    r = h.remote.post("/v1/auth/session", headers={"Authorization": f"Bearer {KEY}"})
    assert (r.status_code, r.json(), r.headers["retry-after"]) == (429, TOO_MANY, "60")


def test_public_routes_are_never_locked(harness) -> None:
    h = harness(SERVER_KEY)
    fail(h.remote, 10, {"X-API-Key": "wrong"})
    assert h.remote.get("/public").status_code == 200


def test_pin_is_revoked_after_100_failures_from_many_addresses(harness) -> None:
    # Many clients behind a trusted proxy: each address fails once.
    proxy = ipaddress.ip_network("127.0.0.1/32")
    h = harness(AuthConfig(server_mode=True, forwarded_allow_ips=(proxy,)))
    # The proxy names its client every time; one on this machine is loopback.
    local_via_proxy = {"X-Forwarded-For": "127.0.0.1"}
    pin = h.enable_pin(local_via_proxy)
    wrong = "000000" if pin != "000000" else "111111"
    statuses = [h.local.get("/consume", headers={"X-Voxgate-Pin": wrong, "X-Forwarded-For": f"10.0.{i // 250}.{i % 250 + 1}"})
                .status_code for i in range(99)]
    assert statuses == [401] * 99
    other = {"X-Forwarded-For": "10.9.9.9"}
    assert h.local.get("/consume", headers={"X-Voxgate-Pin": pin, **other}).json()["principal"] == "pin"
    r = h.local.get("/consume", headers={"X-Voxgate-Pin": wrong, "X-Forwarded-For": "10.8.8.8"})
    assert (r.status_code, r.json()) == (401, {"detail": "PIN required", "code": "pin_required"})  # the 100th failure
    # The right PIN no longer exists; with no key, no credential can help.
    r = h.local.get("/consume", headers={"X-Voxgate-Pin": pin, **other})
    assert (r.status_code, r.json()) == (403, {"detail": "loopback origin required", "code": "loopback_required"})
    assert h.local.get("/v1/admin/share", headers=local_via_proxy).json() == {
        "enabled": False, "url": None, "port": None, "fingerprint": None}
    h.local.portal.call(h.state.share.wait_stopped)
    assert (h.listener.running, h.listener.stops) == (False, 1)
    new_pin = h.enable_pin(local_via_proxy)
    assert h.local.get("/consume", headers={"X-Voxgate-Pin": new_pin, **other}).json()["principal"] == "pin"


def test_pin_budget_resets_with_a_new_pin(harness) -> None:
    h = harness(SERVER_PIN)
    h.enable_pin()
    for _ in range(60):
        h.local.portal.call(h.state.pin_matches, "not-a-pin")
    pin = h.enable_pin()
    for _ in range(60):
        assert h.local.portal.call(h.state.pin_matches, "not-a-pin") is False
    assert h.local.portal.call(h.state.pin_matches, pin) is True


def test_loopback_is_never_locked_out_of_routes(harness) -> None:
    h = harness(SERVER_KEY)
    for _ in range(10):
        assert h.local.post("/v1/auth/session", headers={"X-API-Key": "wrong"}).status_code == 401
    assert h.local.post("/v1/auth/session", headers={"X-API-Key": KEY}).status_code == 429
    assert h.local.get("/admin").json() == {"principal": "loopback", "may_admin": True}


NEIGHBOUR = ("2001:db8:1:2::bad", 50000)
KEY_HOLDER = ("2001:db8:1:2::600d", 50000)


def test_a_neighbour_in_the_same_64_locks_out_only_its_own_address(harness) -> None:
    h = harness(SERVER_KEY)
    app = build_test_app(h.state)
    with TestClient(app, client=NEIGHBOUR) as neighbour, TestClient(app, client=KEY_HOLDER) as holder:
        assert fail(neighbour, 10, {"X-API-Key": "wrong"}) == [401] * 10
        assert neighbour.get("/consume", headers={"X-API-Key": KEY}).status_code == 429
        assert holder.get("/consume", headers={"X-API-Key": KEY}).json()["principal"] == "api_key"


def test_a_64_is_locked_out_after_100_failures_from_its_addresses_together(harness) -> None:
    h = harness(SERVER_KEY)
    app = build_test_app(h.state)
    for i in range(10):  # ten addresses of one /64, each short of its own limit
        with TestClient(app, client=(f"2001:db8:1:2::{i + 1:x}", 50000)) as c:
            assert fail(c, 9, {"X-API-Key": "wrong"}) == [401] * 9
    with TestClient(app, client=("2001:db8:1:2::ff", 50000)) as c:
        assert fail(c, 10, {"X-API-Key": "wrong"}) == [401] * 10
    with TestClient(app, client=KEY_HOLDER) as holder:
        r = holder.get("/consume", headers={"X-API-Key": KEY})
        assert (r.status_code, r.json(), r.headers["retry-after"]) == (429, TOO_MANY, "60")
    with TestClient(app, client=("2001:db8:1:3::1", 50000)) as other_64:
        assert other_64.get("/consume", headers={"X-API-Key": KEY}).status_code == 200
