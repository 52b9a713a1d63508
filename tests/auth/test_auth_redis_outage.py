"""The auth state in a real redis-server that is killed and started again.

While Redis is down, failed attempts are counted in the process (the same
thresholds as the shared lockout), so guessing keys gets the same 401s and then
the same 429 + ``Retry-After`` as when it is up. When Redis answers again the
shared counters decide alone: what the process counted meanwhile is dropped.

The LAN-share PIN is kept in Redis only as a keyed hash and a sealed copy whose
key is not in Redis: no key, field or value there holds the PIN's digits."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig, AuthState
from auth.store_redis import RedisStore
from tests.auth.auth_harness import KEY, LOOPBACK, REMOTE, build_test_app, with_test_host
from tests.support.listeners import FakeListener
from tests.support.redis_server import RedisServer, running_redis

pytestmark = pytest.mark.slow  # a real redis-server process

PREFIX = "outage:"
KEY_REQUIRED = {"detail": "API key required", "code": "api_key_required"}
TOO_MANY = {"detail": "Too many authentication attempts", "code": "too_many_attempts"}
RECOVERY_WAIT_S = 15.0


@contextlib.contextmanager
def gateway(redis: RedisServer, client: tuple[str, int] = REMOTE) -> Iterator[tuple[AuthState, TestClient]]:
    """A test app whose auth state lives in ``redis``, and one client (one event loop)."""
    store = RedisStore(redis.url, prefix=PREFIX, timeout_s=0.5)
    state = AuthState(with_test_host(AuthConfig(server_mode=True, api_key=KEY)),
                      share_listener=FakeListener(), store=store)
    with TestClient(build_test_app(state), client=client) as http:
        try:
            yield state, http
        finally:
            http.portal.call(state.aclose)


def wrong_key(n: int) -> dict[str, str]:
    """A wrong key, by turns in each header that can carry the key."""
    guess = f"guess-{n:04d}-not-the-key-at-all"
    return {"X-API-Key": guess} if n % 2 else {"Authorization": f"Bearer {guess}"}


def outcome(http: TestClient, headers: dict[str, str]) -> tuple[int, dict, str | None]:
    r = http.get("/consume", headers=headers)
    return r.status_code, r.json(), r.headers.get("retry-after")


def redis_keys(redis: RedisServer, pattern: str) -> list[str]:
    return sorted(filter(None, redis.cli("--scan", "--pattern", pattern).splitlines()))


def in_clear(pin: str, stored: list[str]) -> list[str]:
    """The stored strings holding ``pin`` as a run of digits of its own."""
    return [s for s in stored if re.search(rf"(?<![0-9]){pin}(?![0-9])", s)]


def test_thirty_wrong_keys_while_redis_is_down_get_ten_401_then_429(tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis") as redis, gateway(redis) as (_state, http):
        assert outcome(http, {"X-API-Key": KEY})[0] == 200  # Redis in use
        port = redis.port
        redis.kill()

        answers = [outcome(http, wrong_key(n)) for n in range(30)]
        assert [(status, body) for status, body, _ in answers] == [(401, KEY_REQUIRED)] * 10 + [(429, TOO_MANY)] * 20
        assert all(after is None for _, _, after in answers[:10])
        assert all(1 <= int(after or 0) <= 60 for _, _, after in answers[10:])
        # locked out: even the right key, on either transport, is not looked at
        status, body, after = outcome(http, {"Authorization": f"Bearer {KEY}"})
        assert (status, body) == (429, TOO_MANY) and 1 <= int(after or 0) <= 60
        with http.websocket_connect("/v1/tts", headers={"X-API-Key": KEY}) as ws, \
                pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert (closed.value.code, closed.value.reason) == (1008, "Too many authentication attempts")

        # Redis back (empty): it is authoritative again, the outage's local counts are dropped
        with running_redis(tmp_path / "redis-again", port=port) as again:
            deadline = time.monotonic() + RECOVERY_WAIT_S
            while outcome(http, {"X-API-Key": KEY})[0] != 200:
                assert time.monotonic() < deadline, "the lockout of the outage outlived it"
                time.sleep(0.1)
            assert redis_keys(again, f"{PREFIX}fail:*") == []  # nothing was merged into Redis
            # and failures are counted in Redis again
            assert [outcome(http, wrong_key(n))[0] for n in range(10)] == [401] * 10
            assert redis_keys(again, f"{PREFIX}fail:*") == [f"{PREFIX}fail:{REMOTE[0]}"]
            assert outcome(http, {"X-API-Key": KEY})[:2] == (429, TOO_MANY)


def test_a_lockout_counted_in_redis_is_seen_by_another_replica_and_the_outage_counts_afresh(
        tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis") as redis, gateway(redis) as (_a, a), gateway(redis) as (_b, b):
        assert [outcome(a, wrong_key(n))[0] for n in range(10)] == [401] * 10
        assert outcome(b, {"X-API-Key": KEY})[:2] == (429, TOO_MANY)
        redis.kill()
        # each replica now counts on its own, from zero, with the same thresholds
        assert [outcome(b, wrong_key(n))[0] for n in range(11)] == [401] * 10 + [429]
        assert outcome(a, {"X-API-Key": KEY})[0] == 200


def test_the_pin_is_nowhere_in_redis_in_clear_and_every_replica_checks_it(tmp_path: Path) -> None:
    with running_redis(tmp_path / "redis") as redis, gateway(redis, LOOPBACK) as (_a, local), \
            gateway(redis) as (_b, b), gateway(redis) as (_c, c):
        r = local.post("/v1/admin/share")
        assert r.status_code == 201, r.text
        pin = r.json()["pin"]
        wrong = "000000" if pin != "000000" else "111111"
        # another replica checks it, shows it to the admin, mints a session from it
        assert b.get("/consume", headers={"X-Voxgate-Pin": pin}).json()["principal"] == "pin"
        shown = c.get("/v1/admin/share", headers={"X-API-Key": KEY}).json()
        assert (shown["enabled"], shown["pin"], shown["url"]) == (True, pin, f"http://192.0.2.10:8001/?pin={pin}")
        token = c.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"}).json()["token"]
        assert b.get("/consume", headers={"Authorization": f"Bearer {token}"}).json()["principal"] == "pin_session"
        r = c.get("/consume", headers={"X-Voxgate-Pin": wrong})
        assert (r.status_code, r.json()["detail"]) == (401, "PIN required")

        stored = redis.stored_strings(f"{PREFIX}*")
        assert any(s.startswith(f"{PREFIX}share") for s in stored)  # the scan did see the PIN's record
        assert in_clear(pin, stored) == []
