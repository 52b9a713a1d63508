"""Sessions and tickets are capped per principal and refused at the cap: a PIN
guest minting in a loop never evicts the key holder's sessions."""

from __future__ import annotations

import dataclasses

from auth import AuthConfig
from tests.auth.auth_harness import KEY

BEARER = {"Authorization": f"Bearer {KEY}"}
GUEST_FULL = {"detail": "this client holds 100 live sessions, the most it may; revoke some or wait for them to expire",
              "code": "too_many_tokens"}


def test_a_pin_guest_is_refused_at_its_cap_and_the_admin_stays_logged_in(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    admin = h.key_session()
    pin = h.enable_pin()
    statuses = [h.remote.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"}).status_code
                for _ in range(100)]
    assert statuses == [201] * 100
    r = h.remote.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"})
    assert (r.status_code, r.json()) == (429, GUEST_FULL)
    assert h.remote.get("/admin", headers={"Authorization": f"Bearer {admin}"}).json() == {
        "principal": "session", "may_admin": True}
    # Another guest address has a cap of its own.
    assert h.trusted.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"}).status_code == 201


def test_guests_all_together_cannot_crowd_out_the_key_holder(harness) -> None:
    h = harness(dataclasses.replace(AuthConfig(server_mode=True, api_key=KEY), max_sessions=3))
    admin = h.key_session()
    pin = h.enable_pin()
    for client in (h.remote, h.trusted, h.remote):
        assert client.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"}).status_code == 201
    r = h.trusted.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"})
    assert (r.status_code, r.json()) == (429, {
        "detail": "the server holds 3 live sessions of guests, the most it may; try again later",
        "code": "too_many_tokens"})
    assert h.remote.get("/admin", headers={"Authorization": f"Bearer {admin}"}).status_code == 200
    assert h.remote.post("/v1/auth/session", headers=BEARER, json={"transport": "bearer"}).status_code == 201


def test_revoked_and_expired_sessions_free_their_place(harness) -> None:
    h = harness(dataclasses.replace(AuthConfig(server_mode=True, api_key=KEY), max_sessions_per_guest=2))
    pin = h.enable_pin()
    tokens = [h.pin_session(pin) for _ in range(2)]
    assert h.remote.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"}).status_code == 429
    assert h.remote.request("DELETE", "/v1/auth/session",
                            headers={"Authorization": f"Bearer {tokens[0]}"}).status_code == 204
    h.pin_session(pin)
    h.clock.advance(8 * 3600)
    for _ in range(2):
        h.pin_session(pin)  # asserts 201


def test_tickets_are_capped_per_guest_and_refused_at_the_cap(harness) -> None:
    h = harness(dataclasses.replace(AuthConfig(server_mode=True, api_key=KEY), max_tickets_per_guest=3))
    pin = h.enable_pin()
    mint = {"headers": {"X-Voxgate-Pin": pin}, "json": {"path": "/v1/tts"}}
    tickets = [h.remote.post("/v1/auth/ticket", **mint) for _ in range(3)]
    assert [t.status_code for t in tickets] == [201] * 3
    h.secrets.extend(t.json()["ticket"] for t in tickets)
    r = h.remote.post("/v1/auth/ticket", **mint)
    assert (r.status_code, r.json()) == (429, {
        "detail": "this client holds 3 live tickets, the most it may; revoke some or wait for them to expire",
        "code": "too_many_tokens"})
    # The key holder is not a guest; a redeemed ticket frees its place.
    assert h.remote.post("/v1/auth/ticket", headers={"X-API-Key": KEY}, json={"path": "/v1/tts"}).status_code == 201
    with h.remote.websocket_connect(f"/v1/tts?ticket={tickets[0].json()['ticket']}") as ws:
        assert ws.receive_json()["principal"] == "ticket"
    assert h.remote.post("/v1/auth/ticket", **mint).status_code == 201
