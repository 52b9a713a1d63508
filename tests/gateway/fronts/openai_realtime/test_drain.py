"""The drain before a stop on the OpenAI Realtime front, in process with a
fake sidecar: the open item is finished (server VAD: what was read is
finalized; manual commit: the buffer is committed as the client would have),
appends after the drain began are answered ``draining``, then close 1001.
(SIGTERM on a real process with the real ``openai`` client: tests/e2e/test_drain.py.)"""

from __future__ import annotations

from tests.gateway.fronts.openai_realtime.talk import URL, append, manual_turn_started, opened, sync
from tests.gateway.helpers import dictation_client, drain_marks, draining, start_drain, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, next_close, receive

GOING_AWAY = (1001, "server stopping; every final is sent; retry on a new connection")
DRAINING = "the server is draining before it stops; retry (another replica will answer)"
NOT_TAKEN = ("input_audio_buffer.append was not taken: the server is stopping; the audio appended before the drain "
             "is transcribed, send the rest again on a new connection")


def late_append_refusal(prefix: str, number: int) -> dict:
    return {"type": "error", "event_id": f"event_{prefix}{number:05d}", "error": {
        "type": "server_error", "code": "draining", "message": NOT_TAKEN, "param": None, "event_id": "evt_late"}}


def audio_ops_after_the_drain(fake: FakeSidecar) -> list[str]:
    (mark,) = drain_marks(fake)
    ops = [(h["op"], h.get("id")) for h, _ in fake.frames]
    return [op for op, _ in ops[ops.index(("finalize", mark)) + 1:]]


def test_server_vad_finalizes_what_was_read_refuses_later_appends_then_closes_1001(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = opened(ws)
        append(ws, b"\1\0" * 24000)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.25, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "Every word", "stable": "Every word", "start": 0.25,
                               "end": 0.9})
        assert receive(ws)["type"] == "input_audio_buffer.speech_started"
        assert receive(ws)["delta"] == "Every word"
        drained = start_drain(client)
        # the utterance is still open, yet reading stops at once: the audio read so far is finalized
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        append(ws, b"\2\0" * 2400, event_id="evt_late")
        assert receive(ws) == late_append_refusal(prefix, 5)
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Every word counts.", "start": 0.25,
                                             "end": 1.0, "language": "en"},
                              {"ev": "finalized", "id": mark, "utterance": 0})
        item = f"item_{prefix}0001"
        assert [receive(ws) for _ in range(4)] == [
            {"type": "input_audio_buffer.speech_stopped", "event_id": f"event_{prefix}00006", "audio_end_ms": 1000,
             "item_id": item},
            {"type": "input_audio_buffer.committed", "event_id": f"event_{prefix}00007", "previous_item_id": None,
             "item_id": item},
            {"type": "conversation.item.input_audio_transcription.delta", "event_id": f"event_{prefix}00008",
             "item_id": item, "content_index": 0, "delta": " counts."},
            {"type": "conversation.item.input_audio_transcription.completed", "event_id": f"event_{prefix}00009",
             "item_id": item, "content_index": 0, "transcript": "Every word counts.",
             "usage": {"type": "duration", "seconds": 0.75}}]
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True
    assert audio_ops_after_the_drain(fake) == ["close"]  # the late append never reached the recognizer


def test_manual_commit_the_drain_commits_the_buffer_and_completes_it_then_closes_1001(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = manual_turn_started(ws, client, fake, b"\1\0" * 24000)
        fake.play_from_thread(client, {"ev": "partial", "utterance": 0, "text": "Push to", "stable": "Push to", "start": 0.1,
                                       "end": 0.6})
        assert receive(ws)["delta"] == "Push to"
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Push to talk.", "start": 0.1, "end": 0.9,
                                             "language": "en"},
                              {"ev": "finalized", "id": mark, "utterance": 0})
        item = f"item_{prefix}0001"
        assert [receive(ws) for _ in range(3)] == [
            {"type": "conversation.item.input_audio_transcription.delta", "event_id": f"event_{prefix}00005",
             "item_id": item, "content_index": 0, "delta": " talk."},
            {"type": "input_audio_buffer.committed", "event_id": f"event_{prefix}00006", "previous_item_id": None,
             "item_id": item},
            {"type": "conversation.item.input_audio_transcription.completed", "event_id": f"event_{prefix}00007",
             "item_id": item, "content_index": 0, "transcript": "Push to talk.",
             "usage": {"type": "duration", "seconds": 0.8}}]
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True


def test_manual_commit_an_item_the_client_committed_completes_and_an_empty_buffer_is_not_committed(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = manual_turn_started(ws, client, fake, b"\1\0" * 24000)
        ws.send_json({"type": "input_audio_buffer.commit"})
        assert receive(ws)["type"] == "input_audio_buffer.committed"
        sync(ws)
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "Committed.", "start": 0.1, "end": 0.9, "language": "en"},
                              {"ev": "finalized", "id": "m1", "utterance": 0},
                              {"ev": "finalized", "id": mark, "utterance": None})
        delta, completed = receive(ws), receive(ws)
        assert (delta["delta"], completed["type"], completed["transcript"], completed["item_id"]) == (
            "Committed.", "conversation.item.input_audio_transcription.completed", "Committed.",
            f"item_{prefix}0001")
        assert next_close(ws) == GOING_AWAY  # no second commit: nothing was appended after the first
        assert drained.result(timeout=10) is True


def test_a_socket_still_configuring_closes_1001_at_once(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        drained = start_drain(client)
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True
    assert fake.frames == []


def test_at_the_deadline_what_was_read_is_still_finalized_and_sent(tmp_path):
    fake = FakeSidecar()
    # a drain of 0 s: the deadline (stop now) comes right after the drain began
    with dictation_client(tmp_path, fake, drain_s=0) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        append(ws, b"\1\0" * 24000)
        sync(ws)
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.0, "start_sample": 0},
                              {"ev": "final", "utterance": 0, "text": "Late.", "start": 0.0, "end": 0.5, "language": "en"},
                              {"ev": "finalized", "id": mark, "utterance": 0})
        kinds = [receive(ws)["type"] for _ in range(5)]
        assert kinds == ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                         "input_audio_buffer.committed", "conversation.item.input_audio_transcription.delta",
                         "conversation.item.input_audio_transcription.completed"]
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is False


def test_a_new_socket_while_draining_gets_a_draining_error_and_1013(tmp_path):
    with dictation_client(tmp_path) as client:
        drained = start_drain(client)
        assert drained.result(timeout=10) is True
        assert draining(client)
        with client.websocket_connect(URL) as ws:
            assert receive(ws)["error"] == {"type": "server_error", "code": "draining", "message": DRAINING,
                                            "param": None, "event_id": None}
            assert close_code(ws) == (1013, DRAINING)
