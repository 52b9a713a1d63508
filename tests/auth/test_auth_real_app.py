"""The admin rows of the decision table against the real app's GET /v1/admin/sessions."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings
from tests.auth.auth_harness import KEY, LOOPBACK, REMOTE
from tests.support.hosts import TEST_HOST
from tests.support.listeners import FakeListener

SESSIONS = "/v1/admin/sessions"
ADMIN_GATE = {"detail": "loopback origin or admin API key required", "code": "admin_required"}
LOOPBACK_REQUIRED = {"detail": "loopback origin required", "code": "loopback_required"}
KEY_REQUIRED = {"detail": "API key required", "code": "api_key_required"}


def app_for(**settings) -> object:
    return create_app(Settings(engines=(), allowed_hosts=(TEST_HOST,), **settings), share_listener=FakeListener())


@pytest.mark.parametrize(("settings", "client", "headers", "status", "body"), [
    ({}, LOOPBACK, {}, 200, {"sessions": []}),
    ({}, REMOTE, {}, 403, LOOPBACK_REQUIRED),
    ({"api_key": KEY}, REMOTE, {"Authorization": f"Bearer {KEY}"}, 403, LOOPBACK_REQUIRED),
    ({"server_mode": True}, REMOTE, {"Authorization": f"Bearer {KEY}"}, 403, LOOPBACK_REQUIRED),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {}, 403, ADMIN_GATE),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {"Authorization": f"Bearer {KEY}"}, 200, {"sessions": []}),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {"authorization": f"bearer {KEY}"}, 200, {"sessions": []}),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {"X-API-Key": KEY}, 200, {"sessions": []}),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {"X-API-Key": "wrong"}, 401, KEY_REQUIRED),
    ({"server_mode": True, "api_key": KEY}, REMOTE, {"X-Voxgate-Pin": "123456"}, 403, ADMIN_GATE),
    ({"server_mode": True, "allow_anonymous": True}, REMOTE, {}, 403, LOOPBACK_REQUIRED),
], ids=["local-loopback", "local-remote", "local-key", "server-no-key", "server-key-none", "server-key-bearer",
        "server-key-bearer-lowercase", "server-key-x-api-key", "server-key-wrong", "server-key-pin",
        "server-anonymous"])
def test_admin_rows_on_the_real_app(leak_guard, settings, client, headers, status, body) -> None:
    with TestClient(app_for(**settings), client=client) as c:
        r = c.get(SESSIONS, headers=headers)
    assert (r.status_code, r.json()) == (status, body)


def test_session_minted_from_the_key_opens_admin_on_the_real_app(leak_guard) -> None:
    with TestClient(app_for(server_mode=True, api_key=KEY), client=REMOTE) as c:
        r = c.post("/v1/auth/session", headers={"Authorization": f"Bearer {KEY}"}, json={"transport": "bearer"})
        token = r.json()["token"]
        leak_guard.append(token)
        assert c.get(SESSIONS, headers={"Authorization": f"Bearer {token}"}).json() == {"sessions": []}
        share = c.post("/v1/admin/share", headers={"Authorization": f"Bearer {token}"}).json()
        leak_guard.append(share["pin"])
        r = c.get(SESSIONS, headers={"X-Voxgate-Pin": share["pin"]})
        assert (r.status_code, r.json()) == (403, ADMIN_GATE)


def test_unknown_paths_are_consume_class_on_the_real_app(leak_guard) -> None:
    with TestClient(app_for(server_mode=True, api_key=KEY), client=REMOTE) as c:
        r = c.get("/v1/no-such-route")
        assert (r.status_code, r.json()) == (401, KEY_REQUIRED)
        assert c.get("/v1/no-such-route", headers={"X-API-Key": KEY}).status_code == 404
        assert c.get("/health").status_code in (200, 503)  # public
