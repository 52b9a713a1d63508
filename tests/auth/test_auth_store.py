"""The auth store contract, run on both stores: the in-memory one and a real
redis-server. Single use, quota caps checked and taken in one step, expiry,
tags, failure windows (an address and its IPv6 /64 apart), per-guest session
caps, the PIN record; for Redis also replicas racing for one ticket and for a
guest's last places, and an unreachable server."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from auth.lockout import FailureLimiter
from auth.store import Cap, SharedPin, StoreUnavailable, Window
from auth.store_memory import MemoryStore
from auth.store_redis import RedisStore
from auth.tokens import QuotaFull, SessionStore
from tests.support.net import free_port
from tests.support.redis_server import running_redis

pytestmark = pytest.mark.slow  # a real redis-server process
# The stores under test wait this long for Redis (the default is 1 s): on a loaded machine a
# burst of concurrent calls can take longer, and these tests are about what Redis answers.
LOADED_TIMEOUT_S = 30.0

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["memory", "redis"])
async def store(request, redis_server):
    if request.param == "memory":
        made = MemoryStore()
    else:  # a prefix of its own: tests never see each other's keys
        made = RedisStore(redis_server.url, prefix=f"test{next(_prefixes)}:", timeout_s=LOADED_TIMEOUT_S)
    yield made
    await made.aclose()


async def eventually(check, what: str) -> None:
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


async def test_a_taken_token_is_gone_for_everyone_else(store):
    assert await store.put_token("ticket", "k1", "/v1/tts", 30, [Cap("owner:key", 10)]) is None
    assert await store.get_token("ticket", "k1") == "/v1/tts"
    assert await store.take_token("ticket", "k1") == "/v1/tts"
    assert await store.take_token("ticket", "k1") is None
    assert await store.get_token("ticket", "k1") is None
    assert await store.delete_token("ticket", "k1") is False


async def test_caps_are_checked_before_the_put_and_freed_by_a_delete(store):
    guest, everyone = Cap("owner:pin:192.0.2.1", 2), Cap("guests", 3)
    assert await store.put_token("session", "a", "x", 30, [guest, everyone]) is None
    assert await store.put_token("session", "b", "x", 30, [guest, everyone]) is None
    assert await store.put_token("session", "c", "x", 30, [guest, everyone]) == guest
    other = Cap("owner:pin:192.0.2.2", 2)
    assert await store.put_token("session", "d", "x", 30, [other, everyone]) is None
    assert await store.put_token("session", "e", "x", 30, [other, everyone]) == everyone
    assert await store.get_token("session", "c") is None  # refused puts store nothing
    assert await store.delete_token("session", "a") is True
    assert await store.put_token("session", "e", "x", 30, [other, everyone]) is None
    # tables are apart: the same counter name in another table is another counter
    assert await store.put_token("ticket", "a", "x", 30, [guest, everyone]) is None


async def test_an_expired_token_is_gone_and_frees_its_place(store):
    cap = Cap("owner:key", 1)
    assert await store.put_token("ticket", "short", "x", 0.05, [cap]) is None
    assert await store.put_token("ticket", "other", "x", 30, [cap]) == cap

    async def expired() -> bool:
        return await store.get_token("ticket", "short") is None

    await eventually(expired, "the token expires")
    assert await store.put_token("ticket", "other", "x", 30, [cap]) is None


async def test_tagged_tokens_end_together(store):
    cap = Cap("owner:pin", 10)
    for key in ("p1", "p2", "p3"):
        assert await store.put_token("session", key, "pin", 30, [cap], tags=["pin"]) is None
    assert await store.put_token("session", "k1", "key", 30, [cap]) is None
    assert await store.delete_tagged("session", "pin") == 3
    assert [await store.get_token("session", k) for k in ("p1", "p2", "p3", "k1")] == [None, None, None, "key"]
    assert await store.delete_tagged("session", "pin") == 0
    for key in ("q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9"):  # the places were given back
        assert await store.put_token("session", key, "x", 30, [cap]) is None
    assert await store.put_token("session", "q10", "x", 30, [cap]) == cap


async def test_failure_windows_keep_the_latest_and_forget_the_old(store):
    own, block = Window("2001:db8::7", 2), Window("2001:db8::/64", 5)
    for _ in range(3):
        await store.record_failure([own, block], window_s=60)
    await store.record_failure([Window("2001:db8::8", 2), block], window_s=60)
    ages = await store.failure_ages(["2001:db8::7", "2001:db8::/64", "2001:db8::9"], 60)
    assert [len(a) for a in ages] == [2, 4, 0]
    assert all(0 <= age < 60 for age in ages[0]) and ages[0][0] >= ages[0][1]
    assert await store.failure_ages([], 60) == []
    await store.record_failure([Window("198.51.100.7", 5)], window_s=0.05)

    async def forgotten() -> bool:
        return await store.failure_ages(["198.51.100.7"], 0.05) == [[]]

    await eventually(forgotten, "the failure leaves its window")


async def test_the_lockout_counts_an_address_and_its_ipv6_block_apart(store):
    limiter = FailureLimiter(store, limit=3, window_s=60, block_limit=5)
    for _ in range(3):
        await limiter.record_failure("2001:db8::1")
    assert await limiter.retry_after_s("2001:db8::1") == 60
    assert await limiter.retry_after_s("2001:db8::2") is None  # a neighbour in the /64 is not locked out
    for _ in range(2):
        await limiter.record_failure("2001:db8::2")
    assert await limiter.retry_after_s("2001:db8::3") == 60  # 5 from the /64: the block is
    assert await limiter.retry_after_s("2001:db8:0:1::1") is None
    for _ in range(3):
        await limiter.record_failure("198.51.100.7")
    assert await limiter.retry_after_s("198.51.100.7") == 60
    assert await limiter.retry_after_s("198.51.100.8") is None


async def test_sessions_are_capped_per_guest_and_for_all_guests(store):
    sessions = SessionStore(store, ttl_s=30, max_entries=3, max_per_guest=2)
    for _ in range(2):
        await sessions.mint("pin", "g1", "pin:192.0.2.1")
    with pytest.raises(QuotaFull, match="^this client holds 2 live sessions, the most it may; "):
        await sessions.mint("pin", "g1", "pin:192.0.2.1")
    await sessions.mint("pin", "g1", "pin:192.0.2.2")
    with pytest.raises(QuotaFull, match="^the server holds 3 live sessions of guests, the most it may; "):
        await sessions.mint("pin", "g1", "pin:192.0.2.3")
    for _ in range(3):  # the key holder has a pool of its own
        await sessions.mint("api_key", "fp", "key")
    with pytest.raises(QuotaFull, match="^this credential holds 3 live sessions, the most it may; "):
        await sessions.mint("api_key", "fp", "key")
    assert await sessions.revoke_pin_sessions() == 3
    await sessions.mint("pin", "g2", "pin:192.0.2.3")


async def test_the_pin_record_and_its_failures_follow_the_generation(store):
    assert await store.current_share() is None
    # the store keeps the record LanShare hands it (a sealed PIN, auth/pin_seal.py) as it is
    first = await store.open_share("v1.sealed-record-one", "192.168.1.20", 8001)
    assert first == SharedPin("v1.sealed-record-one", first.generation, "192.168.1.20", 8001)
    assert await store.current_share() == first
    assert await store.share_generation() == first.generation
    assert [await store.pin_failure(first.generation) for _ in range(3)] == [1, 2, 3]
    second = await store.open_share("v1.sealed-record-two", "192.168.1.20", 8001, "AB:CD")
    assert second.generation == first.generation + 1
    assert await store.current_share() == SharedPin("v1.sealed-record-two", second.generation, "192.168.1.20", 8001,
                                                    "AB:CD")
    assert await store.pin_failure(first.generation) == 0  # a failure against a dead PIN counts nowhere
    assert await store.pin_failure(second.generation) == 1
    assert await store.close_share(if_generation=first.generation) is False
    assert await store.close_share(if_generation=second.generation) is True
    assert await store.current_share() is None
    assert await store.share_generation() == second.generation + 1
    assert await store.close_share() is False


async def test_replicas_share_one_salt_and_race_for_one_ticket(redis_server):
    prefix = f"test{next(_prefixes)}:"
    replicas = [RedisStore(redis_server.url, prefix=prefix, timeout_s=LOADED_TIMEOUT_S) for _ in range(4)]
    try:
        salts = {await r.binding_salt() for r in replicas}
        assert len(salts) == 1 and len(salts.pop()) == 16
        for round_ in range(20):
            key = f"t{round_}"
            assert await replicas[0].put_token("ticket", key, "/v1/dictation", 30, [Cap("owner:key", 100)]) is None
            taken = await asyncio.gather(*(r.take_token("ticket", key) for r in replicas for _ in range(3)))
            assert sorted(taken, key=str) == ["/v1/dictation"] + [None] * 11
        # a guest racing through every replica at once still gets exactly its cap
        guest, everyone = Cap("owner:pin:192.0.2.9", 5), Cap("guests", 100)
        puts = await asyncio.gather(*(r.put_token("session", f"race{i}-{n}", "x", 30, [guest, everyone])
                                      for i, r in enumerate(replicas) for n in range(6)))
        assert puts.count(None) == 5 and puts.count(guest) == 19
    finally:
        for r in replicas:
            await r.aclose()


async def test_an_unreachable_redis_raises_store_unavailable_without_the_password():
    port = free_port()  # nothing listens there
    store = RedisStore(f"redis://:hunter2@127.0.0.1:{port}/3", timeout_s=0.5, retry_after_s=30)
    try:
        with pytest.raises(StoreUnavailable) as first:
            await store.get_token("session", "x")
        assert str(first.value) == (f"the auth store (Redis at 127.0.0.1:{port}/3) is unreachable: ConnectionError")
        with pytest.raises(StoreUnavailable) as second:  # within retry_after_s: no new attempt
            await store.take_token("ticket", "x")
        assert str(second.value) == f"the auth store (Redis at 127.0.0.1:{port}/3) is unreachable"
        assert "hunter2" not in str(first.value) + str(second.value)
    finally:
        await store.aclose()
