"""The session registry's drain: sessions and held connections are told to
finish, then to stop; the drain waits for both; new ones are refused, except
sessions doing work a held connection took before the drain began. Its fair
shares: one client address holds at most its per-client limit of a kind."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import HTTPConnection

from auth.principal import SCOPE_KEY, Principal, PrincipalKind
from gateway.config import Settings
from gateway.errors import Draining, OverCapacity
from gateway.registry import SessionRegistry, address_share, client_share, per_client_limit

DRAINING = "the server is draining before it stops; retry (another replica will answer)"


async def test_the_drain_reaches_sessions_and_held_connections_and_waits_for_both():
    registry = SessionRegistry(limits={"tts": 4})
    calls: list[tuple[str, bool]] = []
    entry = registry.claim("tts", "a", dict, drain=lambda now: calls.append(("session", now)))
    hold = registry.hold("b", lambda now: calls.append(("connection", now)))
    registry.begin_drain()
    registry.stop_all()
    assert calls == [("session", False), ("connection", False), ("session", True), ("connection", True)]
    assert len(registry) == 1 and registry.list()[0]["client"] == "a"  # a held connection is not a session
    registry.remove(entry.id)
    assert await registry.wait_empty(0) is False  # the connection is still held
    waiting = asyncio.ensure_future(registry.wait_empty(30))
    await asyncio.sleep(0)
    registry.release(hold)
    assert await waiting is True
    registry.release(hold)  # twice is harmless


async def test_while_draining_new_sessions_and_connections_are_refused():
    registry = SessionRegistry(limits={"tts": 1})
    registry.begin_drain()
    for claim in (lambda: registry.claim("tts", "a", dict), lambda: registry.hold("a", lambda now: None)):
        with pytest.raises(Draining) as refused:
            claim()
        assert (refused.value.message, refused.value.retry_after_s, refused.value.close_code) == (DRAINING, 1, 1013)


async def test_work_taken_before_the_drain_still_gets_a_session_within_the_limit():
    registry = SessionRegistry(limits={"tts": 1})
    registry.begin_drain()
    entry = registry.claim("tts", "a", dict, taken_before_drain=True)
    assert registry.count("tts") == 1
    with pytest.raises(OverCapacity) as full:
        registry.claim("tts", "b", dict, taken_before_drain=True)
    assert full.value.code == "over_capacity"
    registry.remove(entry.id)


# ---- fair shares


def test_a_client_share_is_refused_past_its_limit_while_another_client_still_gets_a_session():
    registry = SessionRegistry(limits={"tts": 16}, per_client={"tts": 4})
    mine = [registry.claim("tts", f"203.0.113.7:{port}", dict, share="203.0.113.7") for port in range(4)]
    with pytest.raises(OverCapacity) as refused:
        registry.claim("tts", "203.0.113.7:9", dict, share="203.0.113.7")
    assert (refused.value.code, refused.value.close_code, refused.value.retry_after_s, refused.value.message) == (
        "over_capacity", 1013, 5,
        "too many TTS sessions from one client (limit 4 per client); end one of yours or try again later")
    other = registry.claim("tts", "198.51.100.2:1", dict, share="198.51.100.2")
    assert (registry.count("tts"), registry.count("tts", "203.0.113.7"), registry.count("tts", "198.51.100.2")) == (
        5, 4, 1)
    registry.remove(mine[0].id)  # one of its own ends: the client has room again
    registry.claim("tts", "203.0.113.7:10", dict, share="203.0.113.7")
    registry.remove(other.id)


def test_the_global_limit_is_named_when_the_server_is_full_and_unshared_sessions_count_only_globally():
    registry = SessionRegistry(limits={"dictation": 2}, per_client={"dictation": 1})
    registry.claim("dictation", "a", dict)  # no share: never refused for a client's share
    registry.claim("dictation", "a", dict)
    with pytest.raises(OverCapacity) as full:
        registry.claim("dictation", "b", dict, share="b")
    assert full.value.message == "too many dictation streams (limit 2); try again later"


@pytest.mark.parametrize(("configured", "total", "limit"), [(0, 16, 4), (0, 8, 2), (0, 3, 1), (0, 1, 1), (6, 8, 6)])
def test_a_per_client_limit_left_at_zero_is_a_quarter_of_the_global_one(configured, total, limit):
    assert per_client_limit(configured, total) == limit
    settings = Settings(max_tts_sessions=total, max_tts_sessions_per_client=configured,
                        max_dictation_streams=total, max_dictation_streams_per_client=configured)
    registry = SessionRegistry.for_settings(settings)
    assert registry.per_client == {"tts": limit, "dictation": limit}
    assert registry.limits == {"tts": total, "dictation": total, "transcription": settings.max_transcriptions}


@pytest.mark.parametrize(("address", "share"), [
    ("203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2::5", "2001:db8:1:2::/64"),  # an IPv6 client holds its /64, as it does for the lockout
    ("2001:DB8:1:2:ffff::9", "2001:db8:1:2::/64"),
])
def test_a_share_is_the_client_address_the_auth_middleware_resolved(address, share):
    for kind in (PrincipalKind.API_KEY, PrincipalKind.PIN, PrincipalKind.ANONYMOUS, PrincipalKind.LOOPBACK):
        scope = {"type": "websocket", "client": ("127.0.0.1", 5000), "headers": [],
                 SCOPE_KEY: Principal(kind, address)}  # the proxy's address is not the client's
        assert client_share(HTTPConnection(scope)) == share
    assert address_share(address) == share
