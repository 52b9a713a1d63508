"""The middleware's own duties: principal recording, failing closed, wire forms."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig, AuthMiddleware
from auth.access import RouteClass, http_route, make_classifier, ws_route
from tests.auth.auth_harness import KEY, LOOPBACK, REMOTE, http_echo, socket_echo


def app_without_state() -> Starlette:
    routes = [http_route("/public", http_echo, access=RouteClass.PUBLIC),
              ws_route("/v1/tts", socket_echo, access=RouteClass.CONSUME)]
    app = Starlette(routes=routes)
    app.add_middleware(AuthMiddleware, classify=make_classifier(routes))
    return app


def test_missing_auth_state_fails_closed_even_for_loopback() -> None:
    with TestClient(app_without_state(), client=LOOPBACK) as c:
        r = c.get("/public")
        assert (r.status_code, r.json()) == (503, {"detail": "authentication is not ready", "code": "auth_not_ready"})
        with c.websocket_connect("/v1/tts") as ws:
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
    assert (closed.value.code, closed.value.reason) == (1008, "authentication is not ready")


def test_public_routes_record_who_is_asking(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    assert h.local.get("/public").json() == {"principal": "loopback", "may_admin": True}
    assert h.remote.get("/public").json() == {"principal": "anonymous", "may_admin": False}


def test_refusal_is_json_with_content_length(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    r = h.remote.post("/consume", content=b"ignored")
    assert r.status_code == 401
    assert r.headers["content-type"] == "application/json"
    assert r.content == b'{"detail": "API key required", "code": "api_key_required"}'
    assert "retry-after" not in r.headers


def test_admin_principal_flags(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    assert h.remote.get("/admin", headers={"X-API-Key": KEY}).json() == {"principal": "api_key", "may_admin": True}
    assert h.remote.get("/consume", headers={"X-API-Key": KEY}).json() == {"principal": "api_key", "may_admin": True}
    r = h.remote.get("/consume")
    assert r.status_code == 401 and REMOTE[0] not in r.text
