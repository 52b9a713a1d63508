"""The decision while the auth store is unreachable, in process, with a store
that can be switched off: fail closed (503 / 1013 ``authentication store
unavailable``) for what needs it, serve loopback, the API key and the trusted
network. (A real Redis killed under real replicas: tests/e2e/test_replicas.py.)"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig, AuthState
from auth.store import StoreUnavailable
from auth.store_memory import MemoryStore
from tests.auth.auth_harness import KEY, LOOPBACK, REMOTE, TRUSTED, build_test_app, with_test_host
from tests.auth.auth_table import TRUSTED_NET
from tests.support.listeners import FakeListener

BEARER = {"Authorization": f"Bearer {KEY}"}
DOWN = {"detail": "authentication store unavailable", "code": "auth_store_unavailable"}


class SwitchableStore(MemoryStore):
    """The memory store, every method of which raises while ``down``."""

    down = False

    def __getattribute__(self, name: str):
        attribute = super().__getattribute__(name)
        if name in ("put_token", "get_token", "take_token", "delete_token", "delete_tagged", "record_failure",
                    "failure_ages", "current_share", "share_generation", "open_share", "close_share",
                    "pin_failure", "binding_salt", "ping") and super().__getattribute__("down"):
            async def unreachable(*args, **kwargs):
                raise StoreUnavailable("the auth store (Redis at 127.0.0.1:6379/0) is unreachable: ConnectionError")
            return unreachable
        return attribute


@pytest.fixture
def clients():
    store = SwitchableStore()
    state = AuthState(with_test_host(AuthConfig(server_mode=True, api_key=KEY, trusted_networks=(TRUSTED_NET,))),
                      share_listener=FakeListener(), store=store)
    app = build_test_app(state)
    with contextlib.ExitStack() as stack:
        local, remote, trusted = (stack.enter_context(TestClient(app, client=addr)) for addr in (LOOPBACK, REMOTE, TRUSTED))
        yield store, local, remote, trusted


def close_of(client: TestClient, url: str, **kw) -> tuple[int, str]:
    with client.websocket_connect(url, **kw) as ws, pytest.raises(WebSocketDisconnect) as info:
        ws.receive_json()
    return info.value.code, info.value.reason


def test_what_needs_the_store_is_refused_and_the_rest_is_served(clients) -> None:
    store, local, remote, trusted = clients
    session = remote.post("/v1/auth/session", headers=BEARER, json={"transport": "bearer"}).json()["token"]
    ticket = remote.post("/v1/auth/ticket", headers=BEARER, json={"path": "/v1/tts"}).json()["ticket"]
    pin = local.post("/v1/admin/share").json()["pin"]
    store.down = True

    # served: loopback, the API key (consume and, in server mode, admin), the trusted network
    assert local.get("/admin").json() == {"principal": "loopback", "may_admin": True}
    assert remote.get("/consume", headers=BEARER).json() == {"principal": "api_key", "may_admin": True}
    assert remote.get("/admin", headers={"X-API-Key": KEY}).json() == {"principal": "api_key", "may_admin": True}
    assert trusted.get("/consume").json() == {"principal": "trusted_network", "may_admin": False}
    with remote.websocket_connect("/v1/dictation", headers=BEARER) as ws:
        assert ws.receive_json() == {"principal": "api_key", "may_admin": True}
    # a wrong key is still a wrong key (it needs no store to be judged)
    r = remote.get("/consume", headers={"X-API-Key": "wrong"})
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
    # the admin gate needs no store to say that no credential can open it
    r = remote.get("/admin", headers={"X-Voxgate-Pin": pin})
    assert (r.status_code, r.json()["code"]) == (403, "admin_required")

    # refused: a session, a ticket, a PIN, no credential at all (a PIN might help), minting
    for headers in ({"Authorization": f"Bearer {session}"}, {"Cookie": f"vg_session={session}"},
                    {"X-Voxgate-Pin": pin}, {}):
        r = remote.get("/consume", headers=headers)
        assert (r.status_code, r.json(), r.headers["retry-after"]) == (503, DOWN, "1"), headers
    assert close_of(remote, f"/v1/tts?ticket={ticket}") == (1013, "authentication store unavailable")
    assert close_of(remote, "/v1/dictation", headers={"Authorization": f"Bearer {session}"}) == (
        1013, "authentication store unavailable")
    for path, body in (("/v1/auth/session", {"transport": "bearer"}), ("/v1/auth/ticket", {"path": "/v1/tts"})):
        r = remote.post(path, headers=BEARER, json=body)
        assert (r.status_code, r.json()) == (503, DOWN), path
    assert remote.get("/v1/auth/me", headers={"Cookie": f"vg_session={session}"}).status_code == 503
    assert local.get("/v1/auth/me", headers={"Cookie": f"vg_session={session}"}).json() == {
        "principal": "loopback", "admin": True, "session": False}

    # back up: the same credentials work again, nothing was lost
    store.down = False
    assert remote.get("/consume", headers={"Authorization": f"Bearer {session}"}).json()["principal"] == "session"
    with remote.websocket_connect(f"/v1/tts?ticket={ticket}") as ws:
        assert ws.receive_json()["principal"] == "ticket"
    assert remote.get("/consume", headers={"X-Voxgate-Pin": pin}).json()["principal"] == "pin"


def test_an_inband_socket_may_still_bring_the_key_while_the_store_is_down() -> None:
    from auth.access import RouteClass
    from auth.credentials import Credential, CredentialKind
    from auth.inband import settle
    from auth.policy import Refusal, decide
    from auth.principal import SCOPE_KEY

    store = SwitchableStore()
    store.down = True
    state = AuthState(AuthConfig(server_mode=True, api_key=KEY), store=store)
    unreachable = Refusal(503, "authentication store unavailable", 1)

    def socket_scope() -> dict:
        return {"type": "websocket", "client": ("198.51.100.9", 1), "query_string": b"",
                "path": "/v1/text-to-speech/v1d/stream-input", "headers": [], "subprotocols": []}

    async def run() -> None:
        s = socket_scope()
        s[SCOPE_KEY] = pending = await decide(s, RouteClass.CONSUME_INBAND, state)
        assert (pending.kind.value, pending.pending_detail) == ("pending", "authentication store unavailable")
        assert (await settle(s, state, Credential(CredentialKind.API_KEY, KEY))).kind.value == "api_key"
        assert await settle(s, state, Credential(CredentialKind.API_KEY, "wrong")) == Refusal(401, "API key required")
        for refusal in (await settle(s, state, None),
                        await settle(s, state, Credential(CredentialKind.BEARER, "vgs_not-checkable-now"))):
            assert refusal == unreachable and refusal.close_code == 1013
        # a plain consume route has no first message to wait for
        plain = await decide(socket_scope(), RouteClass.CONSUME, state)
        assert plain == unreachable

    asyncio.run(run())


def locked_app(api_key: str = KEY):
    """A server-mode app over a switchable store and a fake clock; one remote client."""
    from tests.auth.auth_harness import FakeClock

    clock = FakeClock()
    store = SwitchableStore(clock)
    state = AuthState(with_test_host(AuthConfig(server_mode=True, api_key=api_key)), clock=clock, store=store)
    return store, clock, state, TestClient(build_test_app(state), client=REMOTE)


TOO_MANY = {"detail": "Too many authentication attempts", "code": "too_many_attempts"}
KEY_REQUIRED = {"detail": "API key required", "code": "api_key_required"}


def test_failures_lock_out_during_the_outage_with_the_same_limits_and_exact_retry_after() -> None:
    store, clock, _state, client = locked_app()
    with client as remote:
        store.down = True
        for n in range(10):  # every form of a wrong key is judged without the store, and counted
            headers = ({"X-API-Key": "wrong-key"}, {"Authorization": "Bearer wrong-key"},
                       {"Authorization": "Basic d3Jvbmc="})[n % 3]
            r = remote.get("/consume", headers=headers)
            assert (r.status_code, r.json()) == (401, KEY_REQUIRED), headers
        r = remote.get("/consume", headers=BEARER)
        assert (r.status_code, r.json(), r.headers["retry-after"]) == (429, TOO_MANY, "60")
        clock.advance(45)
        assert remote.get("/consume", headers=BEARER).headers["retry-after"] == "15"
        clock.advance(15)
        assert remote.get("/consume", headers=BEARER).json()["principal"] == "api_key"


def test_a_session_token_that_cannot_be_checked_is_not_counted() -> None:
    store, _clock, _state, client = locked_app()
    with client as remote:
        store.down = True
        for _ in range(15):  # a live session's holder retrying through the outage is not locked out
            r = remote.get("/consume", headers={"Authorization": "Bearer vgs_maybe-a-live-session"})
            assert (r.status_code, r.json()) == (503, DOWN)
        assert remote.get("/consume", headers=BEARER).json()["principal"] == "api_key"


def test_a_key_shaped_like_a_session_token_is_still_guarded() -> None:
    # 503 for a wrong guess and 200 for the key would tell them apart: such guesses count
    key = "vgs_" + KEY
    store, _clock, _state, client = locked_app(key)
    with client as remote:
        store.down = True
        assert [remote.get("/consume", headers={"Authorization": "Bearer vgs_guess"}).status_code
                for _ in range(10)] == [503] * 10
        r = remote.get("/consume", headers={"Authorization": f"Bearer {key}"})
        assert (r.status_code, r.json()) == (429, TOO_MANY)


def test_when_the_store_is_back_its_counters_decide_and_the_outage_counts_are_dropped() -> None:
    store, _clock, state, client = locked_app()
    with client as remote:
        for _ in range(4):  # counted in the store
            remote.get("/consume", headers={"X-API-Key": "wrong-key"})
        store.down = True
        assert [remote.get("/consume", headers={"X-API-Key": "wrong-key"}).status_code for _ in range(11)] == \
            [401] * 10 + [429]  # the process counts from zero
        store.down = False
        assert remote.get("/consume", headers=BEARER).json()["principal"] == "api_key"
        assert state.failures.counting_locally is False
        # the store's own 4 are still there: 6 more lock the client out
        assert [remote.get("/consume", headers={"X-API-Key": "wrong-key"}).status_code for _ in range(7)] == \
            [401] * 6 + [429]
