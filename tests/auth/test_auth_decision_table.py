"""AUTH.md's decision table, row by row, over HTTP and over WebSocket.

Each row runs on the test app (whose routes report the principal they were
given) and on the real app of ``gateway.app``: its /v1/engines and
/v1/admin/sessions over HTTP, its sockets (/v1/tts, /v1/dictation and the
fronts' that speak first; there
"allowed" means the route itself answered; a refusal is the same exact status or
close). A new socket route joins the table by adding its path to SOCKET_TARGETS.
"""

from __future__ import annotations

import pytest
from starlette.websockets import WebSocketDisconnect

from tests.auth.auth_table import MODES, ROWS, body, present, row_id

SOCKET_TARGETS = [("test-app", "/v1/tts"), ("test-app", "/v1/dictation"),
                  ("real-app", "/v1/tts"), ("real-app", "/v1/dictation"),
                  ("real-app", "/v1/listen"), ("real-app", "/v1/speak"), ("real-app", "/v1/realtime"),
                  ("real-app", "/v2/listen")]
ADMIN_SOCKET = "/ws/admin"  # the test app's; the real app has no admin socket


def start(make, mode: str):
    m = MODES[mode]
    h = make(m.config)
    pin = h.enable_pin() if m.pin else None
    return h, pin


HTTP_TARGETS = {"test-app": {"consume": "/consume", "admin": "/admin"},
                "real-app": {"consume": "/v1/engines", "admin": "/v1/admin/sessions"}}


@pytest.mark.parametrize("app_kind", HTTP_TARGETS)
@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_http_decision(harness, real_harness, app_kind: str, row) -> None:
    mode, client, route, credential, expected = row
    h, pin = start(real_harness if app_kind == "real-app" else harness, mode)
    p = present(h, credential, pin=pin)
    url = HTTP_TARGETS[app_kind][route] + (f"?{p.query}" if p.query else "")
    r = h.client(client).get(url, headers=p.headers)
    if expected.status is None:
        assert r.status_code == 200
        if app_kind == "test-app":  # the real routes do not report the principal
            assert r.json()["principal"] == expected.principal
    else:
        assert r.status_code == expected.status
        assert r.json() == body(expected.detail)


def _socket_cases() -> list:
    """Every row on every socket target; the real app has no admin socket (its admin
    rows run over HTTP in test_auth_real_app.py)."""
    return [pytest.param(target, row, id=f"{target[0]}{target[1]}-{row_id(row)}")
            for target in SOCKET_TARGETS for row in ROWS
            if not (target[0] == "real-app" and row[2] == "admin")]


@pytest.mark.parametrize(("socket_target", "row"), _socket_cases())
def test_websocket_decision(harness, real_harness, socket_target, row) -> None:
    mode, client, route, credential, expected = row
    app_kind, socket_path = socket_target
    h, pin = start(real_harness if app_kind == "real-app" else harness, mode)
    p = present(h, credential, pin=pin)
    path = socket_path if route == "consume" else ADMIN_SOCKET
    url = path + (f"?{p.query}" if p.query else "")
    with h.client(client).websocket_connect(url, headers=p.headers) as ws:
        first = ws.receive()
        if expected.status is not None:
            assert first == {"type": "websocket.close", "code": 1008, "reason": expected.detail}
        elif app_kind == "test-app":
            assert first["type"] == "websocket.send"
            ws.send_text("hello")
            assert ws.receive_text() == "hello"
        else:
            # Past auth, the real route speaks first: its ready or error event.
            assert first["type"] == "websocket.send" and first["text"].startswith('{"type"')
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
            assert closed.value.code != 1008


def test_table_covers_every_mode_and_transport() -> None:
    modes = {row[0] for row in ROWS}
    credentials = {row[3] for row in ROWS}
    assert modes == set(MODES)
    assert {"bearer_key", "bearer_key_lowercase", "x_api_key", "query_api_key", "session_bearer",
            "session_cookie", "pin_header", "pin_cookie", "pin_session_bearer"} <= credentials


def test_invalid_key_next_to_a_valid_pin_is_final(harness) -> None:
    h, pin = start(harness, "server+key+pin")
    headers = {"Authorization": "Bearer wrong", "X-Voxgate-Pin": pin}
    r = h.remote.get("/consume", headers=headers)
    assert (r.status_code, r.json()) == (401, body("API key required"))
    with h.remote.websocket_connect("/v1/tts", headers=headers) as ws:
        assert ws.receive() == {"type": "websocket.close", "code": 1008, "reason": "API key required"}


def test_invalid_key_from_a_trusted_network_is_final(harness) -> None:
    h, _ = start(harness, "server+key+trusted")
    with h.trusted.websocket_connect("/v1/dictation?api_key=wrong") as ws:
        assert ws.receive() == {"type": "websocket.close", "code": 1008, "reason": "API key required"}
    assert h.trusted.get("/consume").json()["principal"] == "trusted_network"
