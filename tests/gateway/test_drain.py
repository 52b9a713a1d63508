"""The drain before a stop, in process: readiness, refusal of new sessions and
work, dictation streams finishing their open utterance and TTS sessions their
queue, then 1001. (SIGTERM on a real process: tests/e2e/test_drain.py.)"""

from __future__ import annotations

import pytest

from tests.gateway.fakes import FakeTtsEngine, frames_for
from tests.gateway.helpers import dictation_client, drain_marks, start_drain, tts_client, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive

TTS_GOING_AWAY = (1001, "server stopping; retry on a new connection")
DICTATION_GOING_AWAY = (1001, "server stopping; every final is sent; retry on a new connection")
DRAINING_EVENT = {"type": "error", "code": "draining", "retryable": True,
                  "message": "the server is draining before it stops; retry (another replica will answer)"}


def test_ready_turns_503_draining_and_new_work_is_refused(tmp_path):
    with tts_client(tmp_path) as client:
        assert client.get("/health/ready").status_code == 200
        assert client.get("/health/live").json() == {"status": "alive", "version": "0.1.0"}
        drained = start_drain(client)
        assert drained.result(timeout=10) is True  # nothing was open
        r = client.get("/health/ready")
        assert (r.status_code, r.json()["status"], r.headers["retry-after"]) == (503, "draining", "1")
        assert client.get("/health").status_code == 503
        assert client.get("/health/live").status_code == 200
        assert "voxgate_draining 1" in client.get("/metrics").text.splitlines()
        r = client.post("/v1/tts", json={"text": "Too late."})
        assert (r.status_code, r.headers["retry-after"]) == (503, "1")
        assert r.json() == {"detail": DRAINING_EVENT["message"], "code": "draining"}
        with client.websocket_connect("/v1/tts") as ws:
            assert receive(ws) == DRAINING_EVENT
            assert close_code(ws) == (1013, DRAINING_EVENT["message"])


def test_tts_finishes_its_queue_refuses_new_text_then_closes_1001(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    first, second = "The first sentence is long enough.", "A second one, queued."
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": first, "id": "a"})
        ws.send_json({"type": "speak", "text": second, "id": "b"})
        ws.send_json({"type": "text", "text": "Half a sent"})  # in the buffer: it is spoken too
        assert receive(ws) == {"type": "start", "id": "a", "text": first}
        drained = start_drain(client)
        wait_for(lambda: client.get("/health/ready").status_code == 503, "ready is 503")
        ws.send_json({"type": "speak", "text": "After the drain began."})
        events, frames = [], 0
        with pytest.raises(Exception) as info:
            while True:
                message = receive(ws)
                if isinstance(message, bytes):
                    frames += 1
                else:
                    events.append(message)
        assert (info.value.code, info.value.reason) == TTS_GOING_AWAY
        assert drained.result(timeout=10) is True
    refusals = [e for e in events if e["type"] == "error"]
    assert refusals == [{"type": "error", "code": "draining", "retryable": True,
                         "message": "'speak' was not taken: the server is stopping; reconnect and retry what has "
                                    "no \"end\" event"}]
    kinds = [(e["type"], e.get("id")) for e in events if e["type"] != "error"]
    assert kinds == [("end", "a"), ("start", "b"), ("end", "b"), ("start", "u3"), ("end", "u3")]
    assert events[-2]["text"] == "Half a sent"
    assert frames == frames_for(first) + frames_for(second) + frames_for("Half a sent")


def test_tts_stops_at_the_deadline(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.05, frames_by_text={"Endless.": 10_000})
    with tts_client(tmp_path, engine, drain_s=0.3) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "Endless."})
        assert receive(ws)["type"] == "start"
        drained = start_drain(client)
        assert close_code(ws) == TTS_GOING_AWAY
        assert drained.result(timeout=10) is False
        assert engine.streams[0].cancelled


def test_tts_end_during_the_drain_ends_normally(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "One sentence to finish."})
        assert receive(ws)["type"] == "start"
        drained = start_drain(client)
        wait_for(lambda: client.get("/health/ready").status_code == 503, "ready is 503")
        ws.send_json({"type": "end"})
        messages = []
        code = None
        try:
            while True:
                messages.append(receive(ws))
        except Exception as exc:  # the close
            code = (exc.code, exc.reason)
        assert [m["type"] for m in messages if isinstance(m, dict)] == ["end", "closed"]
        assert code == (1000, "")
        assert drained.result(timeout=10) is True


def test_dictation_waits_for_the_open_utterance_then_finalizes_and_closes_1001(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(b"\1\0" * 1600)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.05, "start_sample": 800})
        assert receive(ws) == {"type": "speech_started", "utterance": 0, "at": 0.05}
        drained = start_drain(client)
        wait_for(lambda: client.get("/health/ready").status_code == 503, "ready is 503")
        # the utterance is open: audio is still read and forwarded, nothing is finalized yet
        ws.send_bytes(b"\2\0" * 1600)
        ws.send_json({"type": "keepalive"})
        wait_for(lambda: len(fake.audio_sent(fake.the_stream().id)) == 3200, "the audio after the drain began")
        assert drain_marks(fake) == []
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "every word", "start": 0.05, "end": 0.2,
                                             "language": "en", "end_sample": 3200})
        assert receive(ws)["text"] == "every word"
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "finalized", "id": mark, "utterance": None})
        assert close_code(ws) == DICTATION_GOING_AWAY  # the mark itself is never relayed
        assert drained.result(timeout=10) is True


def test_dictation_with_no_open_utterance_stops_at_once_and_gets_every_final(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(b"\1\0" * 1600)
        ws.send_json({"type": "keepalive"})
        wait_for(lambda: len(fake.audio_sent(fake.the_stream().id)) == 1600, "the audio")
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        # the sidecar had speech in that audio that the gateway had not seen yet: its final comes first
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.0, "start_sample": 0},
                              {"ev": "final", "utterance": 0, "text": "late words", "start": 0.0, "end": 0.1, "language": "en",
                               "end_sample": 1600},
                              {"ev": "finalized", "id": mark, "utterance": 0})
        assert receive(ws) == {"type": "speech_started", "utterance": 0, "at": 0.0}
        assert receive(ws)["text"] == "late words"
        assert close_code(ws) == DICTATION_GOING_AWAY
        assert drained.result(timeout=10) is True


def test_dictation_at_the_deadline_finalizes_the_open_utterance(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake, drain_s=0.3) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(b"\1\0" * 1600)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.05, "start_sample": 800})
        assert receive(ws)["type"] == "speech_started"
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the finalize at the deadline")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "cut at the deadline", "start": 0.05,
                                             "end": 0.1, "language": "en", "end_sample": 1600},
                              {"ev": "finalized", "id": mark, "utterance": 0})
        assert receive(ws)["text"] == "cut at the deadline"
        assert close_code(ws) == DICTATION_GOING_AWAY
        assert drained.result(timeout=10) is False
