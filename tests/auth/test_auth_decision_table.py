"""AUTH.md's decision table, row by row, over HTTP and over WebSocket.

The socket rows run once per path in SOCKET_PATHS; the real speech routes join
the table by serving the same echo contract at those paths.
"""

from __future__ import annotations

import pytest
from starlette.websockets import WebSocketDisconnect

from auth_harness import SOCKET_PATHS
from auth_table import MODES, ROWS, present, row_id

HTTP_PATHS = {"consume": "/consume", "admin": "/admin"}


def start(harness, mode: str):
    m = MODES[mode]
    h = harness(m.config)
    pin = h.enable_pin() if m.pin else None
    return h, pin


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_http_decision(harness, row) -> None:
    mode, client, route, credential, expected = row
    h, pin = start(harness, mode)
    p = present(h, credential, pin=pin)
    url = HTTP_PATHS[route] + (f"?{p.query}" if p.query else "")
    r = h.client(client).get(url, headers=p.headers)
    if expected.status is None:
        assert r.status_code == 200
        assert r.json()["principal"] == expected.principal
    else:
        assert r.status_code == expected.status
        assert r.json() == {"detail": expected.detail}


@pytest.fixture(params=SOCKET_PATHS)
def socket_path(request) -> str:
    return request.param


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_websocket_decision(harness, row, socket_path: str) -> None:
    mode, client, route, credential, expected = row
    h, pin = start(harness, mode)
    p = present(h, credential, pin=pin)
    path = socket_path if route == "consume" else "/ws/admin"
    url = path + (f"?{p.query}" if p.query else "")
    with h.client(client).websocket_connect(url, headers=p.headers) as ws:
        if expected.status is None:
            assert ws.receive_json()["principal"] == expected.principal
            ws.send_text("hello")
            assert ws.receive_text() == "hello"
        else:
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
            assert (closed.value.code, closed.value.reason) == (1008, expected.detail)


def test_table_covers_every_mode_and_transport() -> None:
    modes = {row[0] for row in ROWS}
    credentials = {row[3] for row in ROWS}
    assert modes == set(MODES)
    assert {"bearer_key", "bearer_key_lowercase", "x_api_key", "query_api_key", "session_bearer",
            "session_cookie", "pin_header", "pin_cookie", "pin_session_bearer"} <= credentials
