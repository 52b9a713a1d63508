"""The /v1/tts socket in process (TestClient) with the fake engine: event order,
frames and bytes, resampling, cancel, errors and limits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engines.base import EngineState
from gateway.audio import Encoding, encode
from tests.gateway.fakes import FRAME, FakeTtsEngine, expected_audio, frames_for
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive


def read_utterance(ws) -> tuple[dict, list[bytes], dict]:
    """start, frames, end (or cancelled) of the next utterance."""
    start = receive(ws)
    assert start["type"] == "start", start
    frames = []
    while True:
        message = receive(ws)
        if isinstance(message, bytes):
            frames.append(message)
        else:
            return start, frames, message


def test_ready_then_speak_then_end(tmp_path):
    text = "Hello there, this is a test."
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        ready = receive(ws)
        assert ready == {"type": "ready", "protocol": 1, "session": ready["session"], "engine": "pocket",
                         "voice": "alba", "sample_rate": 24000, "encoding": "pcm_s16le", "frame_samples": 1920}
        ws.send_json({"type": "speak", "text": text, "id": "greet"})
        start, frames, end = read_utterance(ws)
        assert start == {"type": "start", "id": "greet", "text": text}
        n = frames_for(text)
        assert [len(f) for f in frames] == [FRAME * 2] * n
        assert set(end) == {"type", "id", "frames", "audio_s", "ttfa_ms", "rtf"}
        assert (end["type"], end["id"], end["frames"], end["audio_s"]) == ("end", "greet", n, round(n * 0.08, 3))
        assert end["ttfa_ms"] >= 0 and end["rtf"] >= 0
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 1, "audio_s": round(n * 0.08, 3)}
        assert close_code(ws) == (1000, "")


@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_f32le"])
def test_pcm_bytes_equal_the_engine_output_for_the_same_seed(tmp_path, encoding):
    text = "Same seed, same audio."
    with tts_client(tmp_path) as client, client.websocket_connect(f"/v1/tts?encoding={encoding}") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": text, "seed": 1234})
        _, frames, _ = read_utterance(ws)
    assert b"".join(frames) == encode(expected_audio(text, seed=1234), Encoding(encoding))
    assert b"".join(frames) != encode(expected_audio(text, seed=1235), Encoding(encoding))


@pytest.mark.parametrize("rate", [8000, 16000, 44100, 48000])
def test_resampled_output_has_the_requested_rate_and_length(tmp_path, rate):
    text = "Resample this sentence please."
    with tts_client(tmp_path) as client, client.websocket_connect(f"/v1/tts?sample_rate={rate}") as ws:
        assert receive(ws)["sample_rate"] == rate
        ws.send_json({"type": "speak", "text": text})
        _, frames, end = read_utterance(ws)
    samples = sum(len(f) for f in frames) // 2
    native = frames_for(text) * FRAME
    assert samples == round(native * rate / 24000)
    assert all(0 < len(f) // 2 <= rate // 10 for f in frames)  # each message at most 100 ms
    assert end["frames"] == len(frames)
    # No click at frame boundaries: the streamed output equals one-shot resampling.
    import soxr

    whole = soxr.resample(expected_audio(text), 24000, rate, quality="HQ")
    got = np.frombuffer(b"".join(frames), dtype="<i2").astype(np.float32) / 32767
    assert len(got) == len(whole)
    assert np.max(np.abs(got - np.clip(whole, -1, 1))) < 2e-3


def test_text_fragments_flush_and_event_order(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        for fragment in ["Hello", " there.", " How are", " you"]:
            ws.send_json({"type": "text", "text": fragment})
        start1, frames1, end1 = read_utterance(ws)
        ws.send_json({"type": "flush"})
        start2, frames2, end2 = read_utterance(ws)
        ws.send_json({"type": "end"})
        closed = receive(ws)
    assert (start1, end1["id"], len(frames1)) == ({"type": "start", "id": "u1", "text": "Hello there."}, "u1",
                                                  frames_for("Hello there."))
    assert (start2, end2["id"], len(frames2)) == ({"type": "start", "id": "u2", "text": "How are you"}, "u2",
                                                  frames_for("How are you"))
    assert closed["utterances"] == 2


def test_flush_with_an_id_is_answered_after_the_audio_before_it(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "text", "text": "One. Two"})
        ws.send_json({"type": "flush", "id": "turn-1"})
        ws.send_json({"type": "flush", "id": "turn-2"})  # nothing queued in between: answered at once after it
        first = read_utterance(ws)
        second = read_utterance(ws)
        assert (receive(ws), receive(ws)) == ({"type": "flushed", "id": "turn-1"}, {"type": "flushed", "id": "turn-2"})
        ws.send_json({"type": "text", "text": "Three"})  # no sentence end: it waits in the buffer
        ws.send_json({"type": "cancel"})  # drops the buffer
        ws.send_json({"type": "flush", "id": "turn-3"})
        assert receive(ws) == {"type": "cancelled", "id": None, "frames_sent": 0}
        assert receive(ws) == {"type": "flushed", "id": "turn-3"}
    assert [first[0]["text"], second[0]["text"]] == ["One.", "Two"]


def test_end_synthesizes_the_unflushed_rest(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "text", "text": "no sentence end here"})
        ws.send_json({"type": "end"})
        start, _frames, _end = read_utterance(ws)
        assert start["text"] == "no sentence end here"
        assert receive(ws)["type"] == "closed"
        assert close_code(ws)[0] == 1000


def test_cancel_mid_utterance_then_speak_again(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.01)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "x" * 400, "id": "long"})
        ws.send_json({"type": "speak", "text": "queued behind", "id": "next"})
        assert receive(ws)["type"] == "start"
        got = [receive(ws) for _ in range(3)]
        assert all(isinstance(g, bytes) for g in got)
        ws.send_json({"type": "cancel"})
        while True:
            message = receive(ws)
            if isinstance(message, dict):
                break
            got.append(message)
        assert message == {"type": "cancelled", "id": "long", "frames_sent": len(got)}
        assert len(got) < frames_for("x" * 400)
        ws.send_json({"type": "speak", "text": "after the cancel", "id": "after"})
        start, frames, end = read_utterance(ws)  # the queued "next" was dropped: no start for it
        assert (start["id"], end["id"], len(frames)) == ("after", "after", frames_for("after the cancel"))
    assert engine.streams[0].cancelled and engine.streams[0].closed
    assert [s.text for s in engine.streams] == ["x" * 400, "after the cancel"]


def test_cancel_with_nothing_playing(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "text", "text": "half a sentence"})
        ws.send_json({"type": "cancel"})
        assert receive(ws) == {"type": "cancelled", "id": None, "frames_sent": 0}
        ws.send_json({"type": "flush"})  # the buffer was dropped: nothing to say
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 0.0}


@pytest.mark.parametrize(("payload", "code", "message"), [
    ("{", "bad_message", "message is not valid JSON"),
    ({"type": "dance"}, "bad_message",
     "unknown message type 'dance'; expected one of: speak, text, flush, cancel, end, keepalive, ack"),
    ({"type": "speak", "text": ""}, "bad_message", "speak.text is empty"),
    ({"type": "speak", "text": "a" * 2001}, "text_too_long",
     "speak.text has 2001 characters; the limit is 2000 (split it into several messages)"),
    ({"type": "text", "text": None}, "bad_message", "text.text must be a string"),
    ({"type": "speak", "text": "hi", "seed": "x"}, "bad_message",
     "speak.seed: must be an integer between 0 and 4294967295"),
])
def test_bad_messages_get_an_error_and_the_session_goes_on(tmp_path, payload, code, message):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_text(payload if isinstance(payload, str) else json.dumps(payload))
        assert receive(ws) == {"type": "error", "code": code, "message": message, "retryable": False}
        ws.send_json({"type": "speak", "text": "still works"})
        assert read_utterance(ws)[2]["type"] == "end"


def test_binary_message_is_a_bad_message(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_bytes(b"\x00\x01")
        assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False,
                               "message": "binary messages are not accepted on /v1/tts; send JSON text messages"}


def test_unknown_voice_in_speak_lists_the_voices(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "hi", "voice": "nobody"})
        assert receive(ws) == {"type": "error", "code": "unknown_voice", "retryable": False,
                               "message": "unknown voice 'nobody'; available voices: alba, marius",
                               "voices": ["alba", "marius"]}
        ws.send_json({"type": "speak", "text": "hi there", "voice": "marius"})
        assert read_utterance(ws)[2]["type"] == "end"


def test_messages_after_end_are_refused_and_closed_still_comes(tmp_path):
    with tts_client(tmp_path, FakeTtsEngine(frame_delay_s=0.005)) as client, \
            client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "one sentence here"})
        ws.send_json({"type": "end"})
        ws.send_json({"type": "speak", "text": "too late"})
        seen = []
        while True:
            message = receive(ws)
            if isinstance(message, dict):
                seen.append(message["type"])
                if message["type"] == "error":
                    assert message["message"] == ("'speak' after \"end\": the session is finishing and accepts "
                                                  "no more work")
                if message["type"] == "closed":
                    break
        assert sorted(seen) == ["closed", "end", "error", "start"]
        assert seen.index("start") < seen.index("end") < seen.index("closed")
        assert close_code(ws)[0] == 1000


def test_oversize_message_closes_1009(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_text(json.dumps({"type": "speak", "text": "a" * 20000}))
        assert close_code(ws) == (1009, "message of 20029 bytes; the limit is 12096")


def test_queue_limit(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.05)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        for i in range(40):
            ws.send_json({"type": "speak", "text": f"utterance number {i}"})
        errors = []
        while len(errors) < 40 - 33:
            message = receive(ws)
            if isinstance(message, dict) and message["type"] == "error":
                errors.append(message)
        assert errors[0] == {"type": "error", "code": "too_many_utterances", "retryable": True,
                             "message": '32 utterances are already queued (the limit is 32); wait for an "end" '
                                        'event'}


def test_engine_error_mid_utterance_is_reported_with_the_id(tmp_path):
    engine = FakeTtsEngine(fail_after=2)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "this will fail", "id": "f"})
        assert receive(ws)["type"] == "start"
        assert isinstance(receive(ws), bytes) and isinstance(receive(ws), bytes)
        assert receive(ws) == {"type": "error", "code": "engine_error", "message": "fake engine failure",
                               "retryable": False, "id": "f"}
        engine.fail_after = None
        ws.send_json({"type": "speak", "text": "this works"})
        assert read_utterance(ws)[2]["type"] == "end"


# ---- refusals at connect time


@pytest.mark.parametrize(("query", "event", "close"), [
    ("?sample_rate=4000", {"code": "bad_request", "message": "sample_rate: '4000' must be between 8000 and 48000"},
     (4400, "sample_rate: '4000' must be between 8000 and 48000")),
    ("?encoding=ulaw", {"code": "bad_request",
                        "message": "encoding: 'ulaw' must be one of: pcm_s16le, pcm_f32le, opus, mulaw, alaw"},
     (4400, "encoding: 'ulaw' must be one of: pcm_s16le, pcm_f32le, opus, mulaw, alaw")),
    ("?engine=nope", {"code": "unknown_engine", "message": "engine: unknown engine 'nope'; available: pocket"},
     (4400, "engine: unknown engine 'nope'; available: pocket")),
    ("?voice=ghost", {"code": "unknown_voice", "message": "unknown voice 'ghost'; available voices: alba, marius",
                      "voices": ["alba", "marius"]},
     (4400, "unknown voice 'ghost'; available voices: alba, marius")),
])
def test_bad_query_is_refused_with_an_event_and_4400(tmp_path, query, event, close):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts" + query) as ws:
        assert receive(ws) == {"type": "error", "retryable": False, **event}
        assert close_code(ws) == close


def test_engine_loading_is_retryable_1013(tmp_path):
    engine = FakeTtsEngine(state=EngineState.LOADING)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        assert receive(ws) == {"type": "error", "code": "engine_loading", "retryable": True, "state": "loading",
                               "message": "engine pocket is still loading; try again in a few seconds"}
        assert close_code(ws) == (1013, "engine pocket is still loading; try again in a few seconds")


def test_engine_missing_weights_names_the_engine_and_its_state(tmp_path):
    engine = FakeTtsEngine(state=EngineState.MISSING, detail="no model.safetensors in /m/pocket",
                           hint="run: voxgate models pull pocket")
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        message = "Pocket TTS is not available on this gateway (not installed); an admin can see why at GET /v1/engines"
        assert receive(ws) == {"type": "error", "code": "engine_unavailable", "retryable": False,
                               "state": "missing", "message": message}
        assert close_code(ws) == (1011, message)


def test_over_capacity_closes_1013_and_a_slot_frees_on_close(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=1) as client:
        with client.websocket_connect("/v1/tts") as first:
            receive(first)
            with client.websocket_connect("/v1/tts") as second:
                assert receive(second) == {"type": "error", "code": "over_capacity", "retryable": True,
                                           "message": "too many TTS sessions (limit 1); try again later"}
                assert close_code(second) == (1013, "too many TTS sessions (limit 1); try again later")
            first.send_json({"type": "end"})
            assert receive(first)["type"] == "closed"
            assert close_code(first)[0] == 1000
        with client.websocket_connect("/v1/tts") as third:
            assert receive(third)["type"] == "ready"


def test_idle_socket_is_closed_4408_and_keepalive_holds_it(tmp_path):
    import time

    with tts_client(tmp_path, idle_timeout_s=1) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        for _ in range(8):  # twice the idle timeout, kept open by keepalives
            ws.send_json({"type": "keepalive"})
            time.sleep(0.25)
        ws.send_json({"type": "speak", "text": "still here"})
        assert read_utterance(ws)[2]["type"] == "end"
        assert close_code(ws) == (4408, "idle: no message for 1 s (send keepalive to stay open)")


def test_admin_sessions_lists_the_live_tts_session(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/tts?sample_rate=16000") as ws:
        ready = receive(ws)
        ws.send_json({"type": "speak", "text": "count me"})
        _, frames, _ = read_utterance(ws)
        sessions = client.get("/v1/admin/sessions").json()["sessions"]
        assert len(sessions) == 1
        s = sessions[0]
        assert (s["id"], s["kind"], s["engine"], s["voice"], s["state"], s["sample_rate"]) == \
            (ready["session"], "tts", "pocket", "alba", "open", 16000)
        assert (s["utterances"], s["frames_sent"], s["queued_audio_s"], s["pending_utterances"]) == \
            (1, len(frames), 0.0, 0)
        assert s["audio_s_sent"] == round(sum(len(f) for f in frames) / 2 / 16000, 3)
    assert client.get("/v1/admin/sessions").json()["sessions"] == []


def test_engine_queue_full_is_a_retryable_error_event(tmp_path):
    from engines.base import EngineError

    engine = FakeTtsEngine(open_error=EngineError("too many TTS streams", code="over_capacity"))
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "hi", "id": "x"})
        assert receive(ws) == {"type": "error", "code": "over_capacity", "message": "too many TTS streams",
                               "retryable": True, "id": "x"}
        engine.open_error = None
        ws.send_json({"type": "speak", "text": "hi again"})
        assert read_utterance(ws)[2]["type"] == "end"


def test_one_text_message_cannot_queue_more_sentences_than_the_limit(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.05)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "text", "text": "Go. " * 143})
        error = receive(ws)
        assert error == {"type": "error", "code": "too_many_utterances", "retryable": True,
                         "message": "this text holds 143 sentences and 0 utterances are queued (the limit is 32); "
                                    'nothing of it was taken: send less at once, or wait for "end" events'}
        ws.send_json({"type": "text", "text": "One. Two. Three"})
        ws.send_json({"type": "flush", "id": "f"})
        starts = []
        while True:
            message = receive(ws)
            if isinstance(message, dict) and message["type"] == "start":
                starts.append(message["text"])
            if isinstance(message, dict) and message["type"] == "flushed":
                break
        assert starts == ["One.", "Two.", "Three"]


def test_speak_passes_language_and_instruct_to_the_engine(tmp_path):
    engine = FakeTtsEngine()
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "Bonjour.", "language": "fr", "instruct": "a calm, low voice"})
        ws.send_json({"type": "speak", "text": "Plain."})
        read_utterance(ws)
        read_utterance(ws)
        ws.send_json({"type": "speak", "text": "x", "instruct": "y" * 501})
        assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False,
                               "message": "speak.instruct is longer than 500 characters"}
    assert [s.options.extra for s in engine.streams] == [{"language": "fr", "instruct": "a calm, low voice"}, {}]
