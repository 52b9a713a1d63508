"""WebSocket tickets: single-use, 30 s, bound to their path."""

from __future__ import annotations

import pytest
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig
from tests.auth.auth_harness import KEY

SERVER_KEY = AuthConfig(server_mode=True, api_key=KEY)
PATH_DETAIL = {"detail": "path must be one of: /v1/tts, /v1/dictation", "code": "bad_request"}


def outcome(client, url: str) -> str | tuple[int, str]:
    """The principal of an accepted socket, or (close code, reason) of a refused one."""
    with client.websocket_connect(url) as ws:
        try:
            return ws.receive_json()["principal"]
        except WebSocketDisconnect as closed:
            return closed.code, closed.reason


def test_ticket_request_shape(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/ticket", headers={"X-API-Key": KEY}, json={"path": "/v1/dictation"})
    assert r.status_code == 201
    body = r.json()
    h.secrets.append(body["ticket"])
    assert set(body) == {"ticket", "expires_in"} and body["expires_in"] == 30
    assert outcome(h.remote, f"/v1/dictation?ticket={body['ticket']}") == "ticket"


def test_ticket_opens_its_path_once(harness) -> None:
    h = harness(SERVER_KEY)
    ticket = h.ticket("/v1/tts")
    assert outcome(h.remote, f"/v1/tts?ticket={ticket}") == "ticket"
    assert outcome(h.remote, f"/v1/tts?ticket={ticket}") == (1008, "API key required")


def test_ticket_expires_after_30_seconds(harness) -> None:
    h = harness(SERVER_KEY)
    young, old = h.ticket("/v1/tts"), h.ticket("/v1/tts")
    h.clock.advance(29.9)
    assert outcome(h.remote, f"/v1/tts?ticket={young}") == "ticket"
    h.clock.advance(0.1)
    assert outcome(h.remote, f"/v1/tts?ticket={old}") == (1008, "API key required")


def test_ticket_is_bound_to_its_path(harness) -> None:
    h = harness(SERVER_KEY)
    ticket = h.ticket("/v1/tts")
    assert outcome(h.remote, f"/v1/dictation?ticket={ticket}") == (1008, "API key required")
    # Presenting it on the wrong path used it up.
    assert outcome(h.remote, f"/v1/tts?ticket={ticket}") == (1008, "API key required")


def test_ticket_does_not_open_http_routes(harness) -> None:
    h = harness(SERVER_KEY)
    ticket = h.ticket("/v1/tts")
    r = h.remote.get(f"/consume?ticket={ticket}")
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_ticket_never_opens_admin(harness) -> None:
    h = harness(SERVER_KEY)
    ticket = h.ticket("/v1/tts")
    assert outcome(h.remote, f"/ws/admin?ticket={ticket}") == (1008, "API key required")


@pytest.mark.parametrize("body", [{"path": "/v1/admin/share"}, {"path": "/v1/tts/"}, {"path": 3}, {}])
def test_any_other_path_is_400(harness, body) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/ticket", headers={"X-API-Key": KEY}, json=body)
    assert (r.status_code, r.json()) == (400, PATH_DETAIL)


@pytest.mark.parametrize(("raw", "detail"), [
    (b"{not json", "body is not valid JSON"),
    (b"[1, 2]", "body must be a JSON object"),
])
def test_unusable_body_is_400(harness, raw: bytes, detail: str) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/ticket", headers={"X-API-Key": KEY}, content=raw)
    assert (r.status_code, r.json()) == (400, {"detail": detail, "code": "bad_request"})


def test_minting_a_ticket_needs_a_consume_credential(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/ticket", json={"path": "/v1/tts"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_pin_holder_may_mint_a_ticket(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    r = h.remote.post("/v1/auth/ticket", headers={"X-Voxgate-Pin": pin}, json={"path": "/v1/tts"})
    assert r.status_code == 201
    h.secrets.append(r.json()["ticket"])
    assert outcome(h.remote, f"/v1/tts?ticket={r.json()['ticket']}") == "ticket"
