"""``cancel`` with ``played_ms`` on /v1/tts (TestClient, an engine that times its
words): answered with the text heard and left of the utterance playing there,
on a timeline a cancel rebases; bad positions are refused naming the field."""

from __future__ import annotations

import pytest

from tests.gateway.helpers import tts_client
from tests.gateway.tts.timed_fake import TimedFakeEngine
from tests.support.sockets import receive

TEXT = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
FRAME_MS = 80  # a word per frame


def read_frames(ws, count: int) -> list[dict]:
    """Read until ``count`` binary frames came; the JSON events on the way."""
    events, frames = [], 0
    while frames < count:
        message = receive(ws)
        if isinstance(message, bytes):
            frames += 1
        else:
            events.append(message)
    return events


def read_until(ws, kind: str) -> dict:
    while True:
        message = receive(ws)
        if isinstance(message, dict) and message["type"] == kind:
            return message


def test_cancel_names_the_words_played_and_stops_compute_within_a_frame(tmp_path):
    engine = TimedFakeEngine(frame_delay_s=0.02, frames_by_text={TEXT: 200})
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": TEXT, "id": "a"})
        read_frames(ws, 4)
        ws.send_json({"type": "cancel", "played_ms": 3 * FRAME_MS + 40})  # word four played to its midpoint
        cancelled = read_until(ws, "cancelled")
        (stream,) = engine.streams
        produced = stream.produced
        assert cancelled == {"type": "cancelled", "id": "a", "frames_sent": cancelled["frames_sent"],
                             "played_ms": 280, "text_spoken": "one two three four",
                             "text_remaining": TEXT[len("one two three four"):]}
        assert cancelled["text_spoken"] + cancelled["text_remaining"] == TEXT
        assert stream.cancelled and stream.produced < 200
        ws.send_json({"type": "flush", "id": "f"})
        assert read_until(ws, "flushed") == {"type": "flushed", "id": "f"}
        assert stream.produced <= produced + 1  # a frame already being computed may finish, no more


def test_the_utterance_playing_is_found_across_utterances_and_the_timeline_rebases(tmp_path):
    engine = TimedFakeEngine(frame_delay_s=0.0)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "alpha beta", "id": "a"})  # 2 frames: 0-160 ms
        ws.send_json({"type": "speak", "text": "gamma delta epsilon", "id": "b"})  # 3 frames: 160-400 ms
        read_until(ws, "end")
        read_until(ws, "end")
        # b's third word plays 320-400 ms: 1 ms short of its midpoint, it is not heard
        ws.send_json({"type": "cancel", "played_ms": 359})
        assert read_until(ws, "cancelled") == {"type": "cancelled", "id": "b", "frames_sent": 3, "played_ms": 359,
                                               "text_spoken": "gamma delta", "text_remaining": " epsilon"}
        # the timeline now stands at 359 ms: the next audio starts there; at c's second word's midpoint
        # (359 + 80 + 40 ms) that word is heard
        ws.send_json({"type": "speak", "text": "zeta eta", "id": "c"})
        read_until(ws, "end")
        ws.send_json({"type": "cancel", "played_ms": 359 + 120})
        assert read_until(ws, "cancelled") == {"type": "cancelled", "id": "c", "frames_sent": 2, "played_ms": 479,
                                               "text_spoken": "zeta eta", "text_remaining": ""}
        ws.send_json({"type": "cancel", "played_ms": 100})
        assert read_until(ws, "error") == {
            "type": "error", "code": "bad_message", "retryable": False, "field": "cancel.played_ms",
            "message": "cancel.played_ms 100 is before 479, where the previous cancel left this session's audio "
                       "(played_ms counts the audio played since the session started)"}


def test_a_position_past_the_audio_sent_is_refused_and_nothing_is_cancelled(tmp_path):
    engine = TimedFakeEngine()
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "alpha beta", "id": "a"})
        read_until(ws, "end")
        ws.send_json({"type": "cancel", "played_ms": 161})
        assert read_until(ws, "error") == {
            "type": "error", "code": "bad_message", "retryable": False, "field": "cancel.played_ms",
            "message": "cancel.played_ms 161 is past the 160 ms of audio this session sent"}
        ws.send_json({"type": "cancel", "played_ms": 160})
        assert read_until(ws, "cancelled") == {"type": "cancelled", "id": "a", "frames_sent": 2, "played_ms": 160,
                                               "text_spoken": "alpha beta", "text_remaining": ""}


@pytest.mark.parametrize("value", [-1, 1.5, "100", True, 24 * 3600 * 1000 + 1])
def test_a_played_ms_that_is_no_whole_non_negative_number_is_refused(tmp_path, value):
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "cancel", "played_ms": value})
        assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False,
                               "message": "cancel.played_ms must be a whole number of milliseconds from 0 to "
                                          f"86400000, got {str(value)!r}"}


def test_a_cancel_without_played_ms_is_answered_as_before(tmp_path):
    engine = TimedFakeEngine(frame_delay_s=0.02, frames_by_text={TEXT: 200})
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": TEXT, "id": "a"})
        read_frames(ws, 2)
        ws.send_json({"type": "cancel"})
        cancelled = read_until(ws, "cancelled")
        assert cancelled == {"type": "cancelled", "id": "a", "frames_sent": cancelled["frames_sent"]}
