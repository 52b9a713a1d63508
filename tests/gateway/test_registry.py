"""The session registry's drain: sessions and held connections are told to
finish, then to stop; the drain waits for both; new ones are refused, except
sessions doing work a held connection took before the drain began."""

from __future__ import annotations

import asyncio

import pytest

from gateway.errors import Draining, OverCapacity
from gateway.registry import SessionRegistry

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
