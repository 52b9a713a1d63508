"""The WebSocket subprotocol credential (``token, <key>``, Deepgram's browser
form) decides exactly like the same value in ``Authorization: Bearer``: every
row of AUTH.md's table that presents a bearer value is replayed with the value
offered as a subprotocol instead. A refusal still reaches a browser: the
middleware accepts with the ``token`` subprotocol before closing 1008."""

from __future__ import annotations

import json

import pytest

from tests.auth.auth_harness import KEY, Harness
from tests.auth.auth_table import MODES, ROWS, row_id

BEARER_ROWS = [row for row in ROWS if row[2] == "consume" and row[3] in ("bearer_key", "bad_bearer", "session_bearer")]


def bearer_value(h: Harness, credential: str) -> str:
    if credential == "bearer_key":
        return KEY
    if credential == "session_bearer":
        return h.key_session()
    value = KEY + "x"
    h.secrets.append(value)
    return value


@pytest.mark.parametrize("row", BEARER_ROWS, ids=row_id)
def test_subprotocol_credential_decides_like_bearer(harness, row) -> None:
    mode, client, _, credential, expected = row
    m = MODES[mode]
    h = harness(m.config)
    if m.pin:
        h.enable_pin()
    value = bearer_value(h, credential)
    with h.client(client).websocket_connect("/v1/tts", subprotocols=["token", value]) as ws:
        first = ws.receive()
        if expected.status is None:
            assert first["type"] == "websocket.send"
            assert json.loads(first["text"])["principal"] == expected.principal
        else:
            assert ws.accepted_subprotocol == "token"
            assert first == {"type": "websocket.close", "code": 1008, "reason": expected.detail}


def test_a_lone_token_subprotocol_is_no_credential(harness) -> None:
    h = harness(MODES["server+key"].config)
    with h.remote.websocket_connect("/v1/tts", subprotocols=["token"]) as ws:
        assert ws.accepted_subprotocol is None
        assert ws.receive() == {"type": "websocket.close", "code": 1008, "reason": "API key required"}


def test_the_authorization_header_comes_before_the_subprotocol(harness) -> None:
    h = harness(MODES["server+key"].config)
    h.secrets.append("wrong-key-9")
    with h.remote.websocket_connect("/v1/tts", subprotocols=["token", KEY],
                                    headers={"Authorization": "Token wrong-key-9"}) as ws:
        assert ws.receive() == {"type": "websocket.close", "code": 1008, "reason": "API key required"}
