"""POST/DELETE /v1/auth/session: cookies, bearer tokens, PIN sessions, lifetimes."""

from __future__ import annotations

from starlette.testclient import TestClient

from auth import AuthConfig, AuthState
from tests.auth.auth_harness import KEY, REMOTE, build_test_app, with_test_host

SERVER_KEY = AuthConfig(server_mode=True, api_key=KEY)
BEARER = {"Authorization": f"Bearer {KEY}"}
EIGHT_HOURS = 8 * 3600


def set_cookies(response) -> list[str]:
    return response.headers.get_list("set-cookie")


def test_cookie_session_has_the_safe_attributes(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", headers=BEARER, json={"transport": "cookie"})
    assert r.status_code == 204
    [cookie] = set_cookies(r)
    name_value, *attributes = cookie.split("; ")
    name, _, token = name_value.partition("=")
    h.secrets.append(token)
    assert name == "vg_session" and token.startswith("vgs_")
    assert attributes == ["HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={EIGHT_HOURS}"]
    r = h.remote.get("/admin", headers={"Cookie": f"vg_session={token}"})
    assert r.json() == {"principal": "session", "may_admin": True}


def test_cookie_transport_is_the_default(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", headers=BEARER)
    assert r.status_code == 204
    assert set_cookies(r)[0].startswith("vg_session=vgs_")
    h.secrets.append(set_cookies(r)[0].split(";")[0].split("=", 1)[1])


def test_cookie_is_secure_on_https(harness) -> None:
    h = harness(SERVER_KEY)
    state = h.state
    with TestClient(build_test_app(state), base_url="https://testserver", client=REMOTE) as secure:
        r = secure.post("/v1/auth/session", headers=BEARER)
    h.secrets.append(set_cookies(r)[0].split(";")[0].split("=", 1)[1])
    assert set_cookies(r)[0].endswith("; Secure")


def test_bearer_session(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", headers={"X-API-Key": KEY}, json={"transport": "bearer"})
    assert r.status_code == 201
    body = r.json()
    h.secrets.append(body["token"])
    assert body["expires_in"] == EIGHT_HOURS and set(body) == {"token", "expires_in"}
    assert set_cookies(r) == []
    r = h.remote.get("/consume", headers={"Authorization": f"Bearer {body['token']}"})
    assert r.json() == {"principal": "session", "may_admin": True}


def test_session_lasts_eight_hours(harness) -> None:
    h = harness(SERVER_KEY)
    token = h.key_session()
    h.clock.advance(EIGHT_HOURS - 1)
    assert h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    h.clock.advance(1)
    r = h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_key_session_in_local_mode_may_not_admin(harness) -> None:
    h = harness(AuthConfig(api_key=KEY))
    token = h.key_session()
    assert h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"}).json() == {
        "principal": "session", "may_admin": False}


def test_delete_revokes_the_session_and_clears_the_cookies(harness) -> None:
    h = harness(SERVER_KEY)
    token = h.key_session()
    r = h.remote.request("DELETE", "/v1/auth/session", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 204
    assert set_cookies(r) == ["vg_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
                              "vg_pin=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"]
    r = h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_delete_revokes_a_cookie_session(harness) -> None:
    h = harness(SERVER_KEY)
    token = h.key_session()
    assert h.remote.request("DELETE", "/v1/auth/session", headers={"Cookie": f"vg_session={token}"}).status_code == 204
    assert h.remote.get("/consume", headers={"Cookie": f"vg_session={token}"}).status_code == 401


def test_sessions_die_with_the_process(harness) -> None:
    h = harness(SERVER_KEY)
    token = h.key_session()
    restarted = AuthState(with_test_host(SERVER_KEY))
    with TestClient(build_test_app(restarted), client=REMOTE) as client:
        r = client.get("/consume", headers={"Authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_wrong_key_is_401_and_mints_nothing(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", headers={"Authorization": "Bearer wrong"}, json={"transport": "bearer"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
    assert len(h.state.sessions) == 0


def test_no_credential_is_told_what_is_needed(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", json={"transport": "bearer"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
    h.enable_pin()
    r = h.remote.post("/v1/auth/session", json={"transport": "bearer"})
    assert (r.status_code, r.json()) == (401, {"detail": "PIN required", "code": "pin_required"})


def test_a_session_cannot_mint_a_session(harness) -> None:
    h = harness(SERVER_KEY)
    token = h.key_session()
    r = h.remote.post("/v1/auth/session", headers={"Authorization": f"Bearer {token}"}, json={"transport": "bearer"})
    assert (r.status_code, r.json()) == (400, {"detail": "a session is minted from the API key or the PIN; present one of them", "code": "bad_request"})


def test_bad_transport_is_400(harness) -> None:
    h = harness(SERVER_KEY)
    r = h.remote.post("/v1/auth/session", headers=BEARER, json={"transport": "carrier pigeon"})
    assert (r.status_code, r.json()) == (400, {"detail": 'transport must be "cookie" or "bearer"', "code": "bad_request"})


def test_pin_cookie_session(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    r = h.remote.post("/v1/auth/session", json={"pin": pin})
    assert r.status_code == 204
    assert set_cookies(r) == [f"vg_pin={pin}; HttpOnly; SameSite=Strict; Path=/"]
    assert h.remote.get("/consume", headers={"Cookie": f"vg_pin={pin}"}).json() == {"principal": "pin", "may_admin": False}


def test_pin_bearer_session_dies_with_the_pin(harness) -> None:
    h = harness(AuthConfig())
    token = h.pin_session(h.enable_pin())
    assert h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"}).json()["principal"] == "pin_session"
    assert h.local.request("DELETE", "/v1/admin/share").status_code == 204
    h.enable_pin()  # sharing again: a new PIN, the old sessions stay dead
    r = h.remote.get("/consume", headers={"Authorization": f"Bearer {token}"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})


def test_wrong_pin_is_401_pin_required(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    wrong = "000000" if pin != "000000" else "111111"
    r = h.remote.post("/v1/auth/session", json={"pin": wrong})
    assert (r.status_code, r.json()) == (401, {"detail": "PIN required", "code": "pin_required"})
    assert set_cookies(r) == []


def test_pin_must_be_a_string(harness) -> None:
    h = harness(AuthConfig())
    h.enable_pin()
    r = h.remote.post("/v1/auth/session", json={"pin": 123456})
    assert (r.status_code, r.json()) == (400, {"detail": "pin must be a string of 6 digits", "code": "bad_request"})
