"""The outbound queue: order, the audio budget, cancel-purge and stall detection."""

from __future__ import annotations

import asyncio

import pytest

from gateway.tts.outbound import OutboundQueue, OutItem, Stalled


def audio(owner, n: int = 100) -> OutItem:
    return OutItem(owner=owner, data=b"\0" * (2 * n), samples=n)


async def test_items_leave_in_order_and_counters_follow():
    q = OutboundQueue(max_samples=1000)
    q.put_event(OutItem(event={"type": "start"}))
    assert await q.put_audio(audio("u"), 1, lambda: True)
    q.put_event(OutItem(event=lambda: {"type": "end"}))
    assert q.queued_samples == 100 and len(q) == 3
    first, second, third = [await q.get() for _ in range(3)]
    assert first.event_dict() == {"type": "start"}
    assert second.samples == 100
    assert third.event_dict() == {"type": "end"}
    assert q.queued_samples == 0 and len(q) == 0


async def test_producer_waits_for_room_and_resumes_when_the_sender_takes():
    q = OutboundQueue(max_samples=250)
    assert await q.put_audio(audio("u"), 1, lambda: True)
    assert await q.put_audio(audio("u"), 1, lambda: True)
    third = asyncio.create_task(q.put_audio(audio("u"), 5, lambda: True))
    await asyncio.sleep(0.05)
    assert not third.done() and q.queued_samples == 200
    await q.get()
    assert await asyncio.wait_for(third, 1) is True
    assert q.queued_samples == 200


async def test_one_oversized_frame_always_fits_an_empty_queue():
    q = OutboundQueue(max_samples=10)
    assert await q.put_audio(audio("u", 500), 1, lambda: True)


async def test_waiting_producer_gives_up_when_no_longer_wanted():
    q = OutboundQueue(max_samples=100)
    await q.put_audio(audio("u"), 1, lambda: True)
    wanted = {"yes": True}
    waiting = asyncio.create_task(q.put_audio(audio("u"), 5, lambda: wanted["yes"]))
    await asyncio.sleep(0.02)
    wanted["yes"] = False
    q.wake()
    assert await asyncio.wait_for(waiting, 1) is False
    assert q.queued_samples == 100


async def test_no_room_within_the_timeout_is_a_stall():
    q = OutboundQueue(max_samples=100)
    await q.put_audio(audio("u"), 1, lambda: True)
    with pytest.raises(Stalled):
        await q.put_audio(audio("u"), 0.05, lambda: True)


async def test_purge_removes_only_matching_items():
    q = OutboundQueue(max_samples=1000)
    await q.put_audio(audio("a"), 1, lambda: True)
    q.put_event(OutItem(owner="b", event={"type": "start"}))
    await q.put_audio(audio("b"), 1, lambda: True)
    assert q.purge(lambda item: item.owner == "b") == 2
    assert q.queued_samples == 100 and len(q) == 1
    assert (await q.get()).owner == "a"


async def test_too_many_unsent_events_is_a_stall_but_the_last_message_fits():
    q = OutboundQueue(max_samples=100, max_events=2)
    q.put_event(OutItem(event={}))
    q.put_event(OutItem(event={}))
    with pytest.raises(Stalled):
        q.put_event(OutItem(event={}))
    q.put_event(OutItem(event={"type": "closed"}, final=True))
    assert len(q) == 3


async def test_a_patient_producer_waits_past_the_timeout_until_there_is_room():
    q = OutboundQueue(max_samples=100)
    assert await q.put_audio(audio("u"), 1, lambda: True)
    asked = []
    twice = asyncio.Event()

    def away() -> bool:  # a resumable session's client is away: wait on
        asked.append(True)
        if len(asked) == 2:
            twice.set()
        return True

    put = asyncio.ensure_future(q.put_audio(audio("u"), 0.01, lambda: True, patient=away))
    await asyncio.wait_for(twice.wait(), 10)  # two timeouts passed, and it still waits
    assert not put.done()
    await q.get()
    assert await asyncio.wait_for(put, 10) is True
    with pytest.raises(Stalled):  # impatient: the same wait is a stall
        await q.put_audio(audio("u"), 0.01, lambda: True, patient=lambda: False)
