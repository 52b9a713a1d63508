"""The kept messages of a resumable TTS session: numbering, acks, and the two
bounds (count and bytes) with what may and may not be dropped."""

from __future__ import annotations

from gateway.tts.kept import KeptMessages


def filled(n: int, size: int = 10, *, sent: bool, max_messages: int = 4, max_bytes: int = 1000) -> KeptMessages:
    kept = KeptMessages(max_messages=max_messages, max_bytes=max_bytes)
    for _ in range(n):
        seq = kept.add(b"x" * size, attached=True)
        if sent:
            kept.sent(seq)
    return kept


def test_messages_are_numbered_from_one_and_an_ack_releases_them():
    kept = filled(3, sent=True)
    assert (kept.newest, len(kept), kept.bytes) == (3, 3, 30)
    assert kept.after(1) == [b"x" * 10] * 2
    kept.ack(2)
    assert (len(kept), kept.bytes, kept.oldest, kept.acking) == (1, 10, 3, True)
    assert kept.after(2) == [b"x" * 10]
    assert kept.after(1) is None  # acknowledged, so no longer kept
    assert kept.after(3) == []


def test_unsent_messages_are_never_dropped_the_sender_waits_instead():
    kept = filled(4, sent=False)
    assert not kept.has_room(10, attached=True)  # count bound, nothing handed to a socket yet
    assert not kept.has_room(10, attached=False)
    kept = filled(2, size=400, sent=False, max_messages=100)
    assert kept.has_room(200, attached=True)
    assert not kept.has_room(201, attached=True)  # byte bound


def test_while_away_sent_but_unacknowledged_messages_are_kept():
    kept = filled(4, sent=True)
    assert kept.has_room(10, attached=True)  # attached, never acked: the oldest sent one may go
    assert not kept.has_room(10, attached=False)  # away: the client may have missed any of them


def test_attached_without_acks_the_oldest_sent_messages_make_room():
    kept = filled(4, sent=True)
    assert kept.add(b"y", attached=True) == 5
    assert (len(kept), kept.oldest) == (4, 2)
    assert kept.after(0) is None and kept.after(1) is not None


def test_an_acking_client_gets_a_window_nothing_unacknowledged_is_dropped():
    kept = filled(4, sent=True)
    kept.ack(0)
    assert not kept.has_room(10, attached=True)
    kept.ack(1)
    assert kept.has_room(10, attached=True)


def test_one_message_larger_than_the_cap_fits_an_empty_log():
    kept = KeptMessages(max_messages=4, max_bytes=100)
    assert kept.has_room(5000, attached=False)
    kept.add(b"z" * 5000, attached=False)
    assert not kept.has_room(1, attached=False)


def test_a_resume_acknowledges_without_opening_a_window():
    kept = filled(3, sent=True)
    kept.ack(2, explicit=False)
    assert (len(kept), kept.acking) == (1, False)
