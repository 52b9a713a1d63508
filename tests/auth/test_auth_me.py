"""GET /v1/auth/me: who the caller is, so a page knows whether to show admin
controls and a sign-out button. Public, but it judges a presented credential as
a consume route does (failures counted, lockout honoured)."""

from __future__ import annotations

import pytest

from auth import AuthConfig
from tests.auth.auth_harness import KEY
from tests.auth.auth_table import TRUSTED_NET

SERVER_KEY = AuthConfig(server_mode=True, api_key=KEY)
LOCAL_KEY = AuthConfig(api_key=KEY)
NOBODY = {"principal": None, "admin": False, "session": False}


def me(client, **kw) -> dict:
    r = client.get("/v1/auth/me", **kw)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    return r.json()


def test_loopback_is_admin_without_a_session(harness) -> None:
    h = harness(AuthConfig())
    assert me(h.local) == {"principal": "loopback", "admin": True, "session": False}


@pytest.mark.parametrize(("config", "caller", "principal", "admin"), [
    (LOCAL_KEY, "local", "loopback", True),  # loopback stays loopback, and has a session
    (SERVER_KEY, "remote", "session", True),  # a key session is admin in server mode only
    (LOCAL_KEY, "remote", "session", False),
])
def test_a_live_key_session_cookie_is_a_session(harness, config, caller, principal, admin) -> None:
    h = harness(config)
    token = h.key_session()
    assert me(getattr(h, caller), headers={"Cookie": f"vg_session={token}"}) == {
        "principal": principal, "admin": admin, "session": True}


def test_loopback_with_a_dead_session_cookie_has_none_and_nothing_is_counted(harness) -> None:
    h = harness(LOCAL_KEY)
    for _ in range(12):
        assert me(h.local, headers={"Cookie": "vg_session=vgs_gone"}) == {
            "principal": "loopback", "admin": True, "session": False}
    assert h.local.portal.call(h.state.failures.retry_after_s, "127.0.0.1") is None


@pytest.mark.parametrize("config", [SERVER_KEY, LOCAL_KEY, AuthConfig()])
def test_a_remote_caller_without_a_credential_is_nobody(harness, config) -> None:
    h = harness(config)
    assert me(h.remote) == NOBODY


def test_a_remote_caller_with_a_pin_share_on_but_no_pin_is_nobody(harness) -> None:
    h = harness(AuthConfig())
    h.enable_pin()
    assert me(h.remote) == NOBODY


def test_the_key_itself_is_no_session(harness) -> None:
    h = harness(SERVER_KEY)
    assert me(h.remote, headers={"X-API-Key": KEY}) == {"principal": "api_key", "admin": True, "session": False}


def test_pin_cookie_is_a_session_and_never_admin(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    assert me(h.remote, headers={"Cookie": f"vg_pin={pin}"}) == {"principal": "pin", "admin": False, "session": True}
    # the header is presented on every request by its client: nothing to sign out of
    assert me(h.remote, headers={"X-Voxgate-Pin": pin}) == {"principal": "pin", "admin": False, "session": False}
    token = h.pin_session(pin)
    assert me(h.remote, headers={"Authorization": f"Bearer {token}"}) == {
        "principal": "pin_session", "admin": False, "session": True}


def test_trusted_network_without_a_credential(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY, trusted_networks=(TRUSTED_NET,)))
    assert me(h.trusted) == {"principal": "trusted_network", "admin": False, "session": False}


def test_wrong_credentials_are_counted_and_lock_out(harness) -> None:
    h = harness(SERVER_KEY)
    for _ in range(10):
        assert me(h.remote, headers={"X-API-Key": "wrong"}) == NOBODY
    r = h.remote.get("/v1/auth/me", headers={"X-API-Key": KEY})
    assert (r.status_code, r.json(), r.headers["retry-after"]) == (
        429, {"detail": "Too many authentication attempts", "code": "too_many_attempts"}, "60")


def test_the_real_app_serves_it_to_anyone(real_harness) -> None:
    h = real_harness(SERVER_KEY)
    assert me(h.remote) == NOBODY
    assert me(h.local) == {"principal": "loopback", "admin": True, "session": False}
