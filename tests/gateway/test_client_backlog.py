"""The dictation client's audio backlog: what it sends again after a resume."""

from __future__ import annotations

from gateway.client.resume import AudioBacklog


def test_the_backlog_gives_the_messages_from_the_server_offset():
    backlog = AudioBacklog(max_bytes=1000)
    for chunk in (b"aaaa", b"bbbb", b"cccc"):
        backlog.add(chunk)
    assert backlog.since(4) == [b"bbbb", b"cccc"]
    assert backlog.since(12) == []
    assert backlog.since(13) is None  # beyond what was sent


def test_the_backlog_is_bounded_and_says_when_audio_is_gone():
    backlog = AudioBacklog(max_bytes=8)
    for chunk in (b"aaaa", b"bbbb", b"cccc"):
        backlog.add(chunk)
    assert (backlog.sent, backlog.floor) == (12, 4)
    assert backlog.since(0) is None
    assert backlog.since(4) == [b"bbbb", b"cccc"]
