"""The /v1/dictation socket in process (TestClient) with a fake sidecar: the
handshake, parameter and message validation, limits, audio conversion and the
relay of sidecar events with their invariants."""

from __future__ import annotations

import json
from contextlib import ExitStack

import numpy as np
import pytest

from engines.base import EngineState
from tests.gateway.helpers import dictation_client, make_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive


def test_ready_echoes_the_parameters_and_names_the_model(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/dictation?sample_rate=48000") as ws:
        ready = receive(ws)
        assert ready == {"type": "ready", "session": ready["session"], "protocol": 1, "sample_rate": 48000,
                         "encoding": "pcm_s16le", "language": "auto", "model": "tiny.en"}
        assert ready["session"].startswith("dic-")


def test_the_sidecar_is_opened_with_the_stream_options(tmp_path):
    fake = FakeSidecar()
    url = "/v1/dictation?interim=false&word_timestamps=true&silence_ms=800&language=en&eager=true&terms=pgvector"
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(url) as ws:
        receive(ws)
        header = fake.frames[0][0]
        assert header == {"op": "open", "stream": header["stream"], "language": "en", "interim": False,
                          "word_timestamps": True, "silence_ms": 800, "eager": True, "offset": 0,
                          "prompt": "pgvector.", "terms": ["pgvector"], "first_utterance": 0, "stable": ""}


@pytest.mark.parametrize(("query", "reason"), [
    ("encoding=pcm_mulaw", "encoding: 'pcm_mulaw' must be one of: pcm_s16le, pcm_f32le, mulaw, alaw, opus, webm, ogg"),
    ("sample_rate=4000", "sample_rate: '4000' must be between 8000 and 48000"),
    ("sample_rate=fast", "sample_rate: 'fast' is not an integer"),
    ("encoding=webm&sample_rate=48000", ("sample_rate: '48000' is not taken with encoding=webm: the stream carries "
                                         "its own rate; leave sample_rate out")),
    ("silence_ms=100", "silence_ms: 100 must be between 200 and 5000"),
    ("silence_ms=1.5", "silence_ms: '1.5' is not an integer"),
    ("language=english", "language: 'english' is not a language code (two or three letters, such as 'en') or 'auto'"),
    ("interim=maybe", "interim: 'maybe' is not a boolean (use true or false)"),
    ("eager=soon", "eager: 'soon' is not a boolean (use true or false)"),
    # a parameter the socket would not act on is refused, never dropped (credentials are the auth layer's)
    ("punctuate=true&api_key=", ("punctuate: not a parameter here; known: sample_rate, encoding, language, interim, "
                                "word_timestamps, silence_ms, eager, terms, resumable")),
])
def test_a_bad_query_parameter_closes_4400_naming_it(tmp_path, query, reason):
    with dictation_client(tmp_path) as client, client.websocket_connect(f"/v1/dictation?{query}") as ws:
        assert close_code(ws) == (4400, reason[:123])  # a close reason holds 123 bytes


def test_a_language_the_model_lacks_gets_unsupported_language_then_4400(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/dictation?language=de") as ws:
        error = receive(ws)
        message = ("language: the ASR model tiny.en does not support 'de' (available: en); "
                   "an admin can install multilingual Whisper base")
        assert error == {"type": "error", "code": "unsupported_language", "message": message, "retryable": False}
        assert close_code(ws) == (4400, message[:123])


def test_a_multilingual_model_accepts_the_language(tmp_path):
    fake = FakeSidecar(languages=("en", "de", "fr"))
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?language=de") as ws:
        assert receive(ws)["language"] == "de"
        assert fake.frames[0][0]["language"] == "de"


def test_missing_asr_answers_its_state_and_closes_1011(tmp_path):
    fake = FakeSidecar(state=EngineState.MISSING, detail="multilingual Whisper base is not installed in /x",
                       hint="voxgate models install whisper-base")
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        message = ("Speech recognition is not available on this gateway (not installed); an admin can see why at "
                   "GET /v1/engines")
        assert receive(ws) == {"type": "error", "code": "engine_unavailable", "message": message,
                               "retryable": False, "state": "missing"}
        assert close_code(ws) == (1011, message)


def test_a_gateway_without_asr_answers_engine_unavailable(tmp_path):
    with make_client(tmp_path) as client, client.websocket_connect("/v1/dictation") as ws:
        error = receive(ws)
        assert error["code"] == "engine_unavailable"
        assert close_code(ws) == (1011, "Speech recognition is not enabled on this gateway")


def test_over_the_stream_limit_a_new_socket_closes_1013(tmp_path):
    with dictation_client(tmp_path, max_dictation_streams=1) as client, client.websocket_connect("/v1/dictation") as first:
        receive(first)
        with client.websocket_connect("/v1/dictation") as second:
            assert close_code(second) == (1013, "too many dictation streams (limit 1); try again later")
        first.send_json({"type": "end"})
        assert receive(first) == {"type": "closed", "utterances": 0, "audio_s": 0.0}


REOPENS = 50


def test_at_the_stream_limit_a_client_that_reopens_on_closed_is_never_over_capacity(tmp_path):
    # the slot is free once ``closed`` arrives: the next socket opens while this one is still open
    refusals = []
    with dictation_client(tmp_path, max_dictation_streams=1) as client, ExitStack() as sockets:
        ws = sockets.enter_context(client.websocket_connect("/v1/dictation"))
        assert receive(ws)["type"] == "ready"
        for _ in range(REOPENS):
            ws.send_json({"type": "end"})
            assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 0.0}
            after = sockets.enter_context(client.websocket_connect("/v1/dictation"))
            first = receive(after)
            if first["type"] != "ready":
                refusals.append(first["code"])
                assert close_code(after)[0] == 1013
                assert close_code(ws) == (1000, "")
                after = sockets.enter_context(client.websocket_connect("/v1/dictation"))
                assert receive(after)["type"] == "ready"
            ws = after
    assert refusals == []


def test_odd_byte_counts_keep_the_partial_sample_for_the_next_message(tmp_path):
    fake = FakeSidecar()
    samples = np.array([1000, -2000, 3000, 32767], dtype="<i2").tobytes()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(samples[:3])
        ws.send_bytes(samples[3:7])
        ws.send_bytes(samples[7:])
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 0.0}
        sent = fake.audio_sent(stream_of_id(fake))
        assert sent.tolist() == [1000 / 32768, -2000 / 32768, 3000 / 32768, 32767 / 32768]


def stream_of_id(fake: FakeSidecar) -> str:
    return fake.frames[0][0]["stream"]


def test_f32_audio_with_nan_is_bad_audio_and_the_session_goes_on(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect("/v1/dictation?encoding=pcm_f32le") as ws:
        receive(ws)
        ws.send_bytes(np.array([0.1, np.nan], dtype="<f4").tobytes())
        assert receive(ws) == {"type": "error", "code": "bad_audio", "retryable": False,
                               "message": "pcm_f32le audio contains NaN or infinite samples; the message was dropped"}
        ws.send_bytes(np.array([0.25, -0.5], dtype="<f4").tobytes())
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
        assert fake.audio_sent(stream_of_id(fake)).tolist() == [0.25, -0.5]


def test_audio_is_resampled_to_16_khz(tmp_path):
    fake = FakeSidecar()
    tone = (np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000) * 0.5 * 32767).astype("<i2").tobytes()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?sample_rate=8000") as ws:
        receive(ws)
        ws.send_bytes(tone)
        ws.send_json({"type": "end"})
        closed = receive(ws)
        sent = fake.audio_sent(stream_of_id(fake))
        assert len(sent) == 16000
        assert closed == {"type": "closed", "utterances": 0, "audio_s": 1.0}
        spectrum = np.abs(np.fft.rfft(sent[2000:14000]))
        assert abs(np.argmax(spectrum) * 16000 / 12000 - 440) < 2


@pytest.mark.parametrize(("text", "message"), [
    ("hello", "message is not valid JSON"),
    ("[1]", "message must be a JSON object with a \"type\""),
    ('{"type": 3}', "message has no \"type\" string"),
    ('{"type": "speak"}', "unknown message type 'speak'; expected one of: finalize, config, end, keepalive"),
])
def test_a_bad_text_message_is_bad_message_and_the_session_goes_on(tmp_path, text, message):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_text(text)
        assert receive(ws) == {"type": "error", "code": "bad_message", "message": message, "retryable": False}
        ws.send_json({"type": "keepalive"})
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
        assert close_code(ws) == (1000, "")


def test_a_10_mb_message_closes_1009_and_other_sessions_go_on(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as other:
        receive(other)
        with client.websocket_connect("/v1/dictation") as ws:
            receive(ws)
            ws.send_bytes(b"\0" * (10 * 1024 * 1024))
            assert close_code(ws) == (1009, "audio message of 10485760 bytes; the limit is 1048576, send smaller chunks")
        other.send_bytes(b"\1\0" * 1600)
        other.send_json({"type": "end"})
        assert receive(other) == {"type": "closed", "utterances": 0, "audio_s": 0.1}


def test_a_huge_text_message_closes_1009(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_text(json.dumps({"type": "keepalive", "pad": "x" * 100_000}))
        assert close_code(ws) == (1009, "text message longer than 65536 bytes")


def test_an_idle_client_is_closed_4408(tmp_path):
    with dictation_client(tmp_path, idle_timeout_s=1) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        assert close_code(ws) == (4408, "no audio or message for 1 s")


def test_sidecar_events_are_relayed_as_protocol_events(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect("/v1/dictation?word_timestamps=true") as ws:
        receive(ws)
        words = [{"word": "hi", "start": 0.5, "end": 0.7, "probability": 0.9}]
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 1600},
                              {"ev": "partial", "utterance": 0, "text": "hi", "stable": "", "start": 0.5, "end": 1.0,
                               "lag_s": 0.3},
                              {"ev": "final", "utterance": 0, "text": "hi there.", "start": 0.5, "end": 1.2, "language": "en",
                               "words": words, "end_sample": 25600, "lag_s": 0.4})
        assert receive(ws) == {"type": "speech_started", "utterance": 0, "at": 0.5}
        assert receive(ws) == {"type": "partial", "utterance": 0, "text": "hi", "stable": "", "start": 0.5,
                               "end": 1.0, "lag_s": 0.3}
        assert receive(ws) == {"type": "final", "utterance": 0, "text": "hi there.", "start": 0.5, "end": 1.2,
                               "language": "en", "words": words}
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 1, "audio_s": 0.0}
        assert close_code(ws) == (1000, "")


def test_an_utterance_without_words_ends_with_discarded(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 1600},
                              {"ev": "discarded", "utterance": 0, "end_sample": 16000})
        assert receive(ws) == {"type": "speech_started", "utterance": 0, "at": 0.5}
        assert receive(ws) == {"type": "discarded", "utterance": 0}


def test_duplicates_from_a_replay_never_reach_the_client(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "one two", "stable": "one", "start": 0.5, "end": 1.0},
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "won", "stable": "", "start": 0.5, "end": 1.0},
                              {"ev": "final", "utterance": 0, "text": "one two three", "start": 0.5, "end": 1.5,
                               "language": "en", "end_sample": 30000},
                              {"ev": "partial", "utterance": 0, "text": "late", "stable": "one", "start": 0.5, "end": 1.6},
                              {"ev": "final", "utterance": 0, "text": "again", "start": 0.5, "end": 1.5, "language": "en"})
        ws.send_json({"type": "end"})
        kinds = []
        while True:
            event = receive(ws)
            kinds.append((event["type"], event.get("text")))
            if event["type"] == "closed":
                break
        assert kinds == [("speech_started", None), ("partial", "one two"), ("final", "one two three"),
                         ("closed", None)]


def test_eager_finals_and_turn_resumed_are_relayed(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?eager=true") as ws:
        receive(ws)
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 1600},
                              {"ev": "eager_final", "utterance": 0, "text": "turn on", "start": 0.5, "end": 1.1, "language": "en"},
                              {"ev": "turn_resumed", "utterance": 0, "at": 1.4},
                              {"ev": "partial", "utterance": 0, "text": "turn on the", "stable": "turn on", "start": 0.5,
                               "end": 1.6, "lag_s": 0.2},
                              {"ev": "eager_final", "utterance": 0, "text": "turn on the lights.", "start": 0.5, "end": 2.0,
                               "language": "en"},
                              {"ev": "final", "utterance": 0, "text": "turn on the lights.", "start": 0.5, "end": 2.0,
                               "language": "en", "end_sample": 40000})
        assert [receive(ws) for _ in range(6)] == [
            {"type": "speech_started", "utterance": 0, "at": 0.5},
            {"type": "eager_final", "utterance": 0, "text": "turn on", "start": 0.5, "end": 1.1, "language": "en"},
            {"type": "turn_resumed", "utterance": 0, "at": 1.4},
            {"type": "partial", "utterance": 0, "text": "turn on the", "stable": "turn on", "start": 0.5,
             "end": 1.6, "lag_s": 0.2},
            {"type": "eager_final", "utterance": 0, "text": "turn on the lights.", "start": 0.5, "end": 2.0,
             "language": "en"},
            {"type": "final", "utterance": 0, "text": "turn on the lights.", "start": 0.5, "end": 2.0,
             "language": "en"}]


def test_a_replay_that_changes_an_eager_final_withdraws_it_before_the_final(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?eager=true") as ws:
        receive(ws)
        fake.play_from_thread(client,
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "eager_final", "utterance": 0, "text": "turn on", "start": 0.5, "end": 1.1, "language": "en"},
                              # a restarted sidecar replays the utterance and decodes it a little differently
                              {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "turn", "stable": "", "start": 0.5, "end": 0.9},
                              {"ev": "final", "utterance": 0, "text": "turn on.", "start": 0.5, "end": 1.1, "language": "en",
                               "end_sample": 24000})
        assert [receive(ws)["type"] for _ in range(2)] == ["speech_started", "eager_final"]
        assert receive(ws) == {"type": "turn_resumed", "utterance": 0, "at": 1.1}
        assert receive(ws)["text"] == "turn on."


def test_finalize_is_passed_to_the_sidecar_in_order_with_the_audio(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(b"\0\0" * 160)
        ws.send_json({"type": "finalize"})
        ws.send_bytes(b"\0\0" * 160)
        ws.send_json({"type": "end"})
        receive(ws)
        assert fake.ops(stream_of_id(fake)) == ["open", "audio", "finalize", "audio", "end"]


def test_a_finalize_with_an_id_reaches_the_sidecar_and_its_answer_the_client(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_json({"type": "finalize", "id": "turn-3"})
        ws.send_json({"type": "keepalive"})  # a round trip: the finalize was handled before it
        ws.send_json({"type": "finalize", "id": 7})
        assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False,
                               "message": "finalize.id must be a string of 1..128 characters"}
        assert [h for h, _ in fake.frames if h["op"] == "finalize"] == [
            {"op": "finalize", "stream": stream_of_id(fake), "id": "turn-3"}]
        fake.play_from_thread(client, {"ev": "finalized", "id": "turn-3", "utterance": None})
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "finalized", "id": "turn-3", "utterance": None}
        assert receive(ws)["type"] == "closed"


def test_fields_the_protocol_does_not_define_are_ignored_and_the_session_goes_on(tmp_path):
    """PROTOCOL.md: unknown fields are ignored; the messages act as without them."""
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_json({"type": "finalize", "id": "turn-4", "utterance": 2})
        ws.send_json({"type": "keepalive", "note": "still here"})
        ws.send_json({"type": "end", "flush": True})
        assert receive(ws)["type"] == "closed"
        assert close_code(ws) == (1000, "")
        assert [h for h, _ in fake.frames if h["op"] == "finalize"] == [
            {"op": "finalize", "stream": stream_of_id(fake), "id": "turn-4"}]


def test_admin_sessions_lists_the_stream_with_its_lag(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(b"\0\0" * 16000)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "x", "stable": "", "start": 0.1, "end": 0.6,
                               "lag_s": 1.75})
        receive(ws), receive(ws)
        (entry,) = client.get("/v1/admin/sessions").json()["sessions"]
        assert entry["kind"] == "dictation"
        assert (entry["lag_s"], entry["audio_s"], entry["utterances"], entry["phase"]) == (1.75, 1.0, 0, "streaming")


def test_a_remote_client_needs_the_api_key(tmp_path):
    with dictation_client(tmp_path, client=("192.0.2.7", 5000), api_key="k" * 32) as client:
        with client.websocket_connect("/v1/dictation") as ws:
            assert close_code(ws) == (1008, "API key required")
        with client.websocket_connect("/v1/dictation", headers={"Authorization": "Bearer " + "k" * 32}) as ws:
            assert receive(ws)["type"] == "ready"
        r = client.post("/v1/audio/transcriptions", files={"file": ("a.wav", b"", "audio/wav")})
        assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
