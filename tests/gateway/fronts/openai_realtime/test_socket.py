"""OpenAI Realtime transcription sessions in process (TestClient) with a fake
sidecar: the configuration handshake, the events of both turn-detection modes,
commit and clear, OpenAI-shaped errors, refusals and their close codes, and the
browser subprotocol credential."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.websockets import WebSocketDisconnect

from gateway.codecs import g711
from gateway.errors import GatewayError
from gateway.protocol.common import ErrorEvent
from tests.gateway.fronts.openai_realtime.talk import URL, append, configure, manual_turn_started, opened, sync
from tests.gateway.helpers import dictation_client, make_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive

KEY = "vgk-realtime-test-key-4f9a2c"


def test_created_then_updated_and_the_first_audio_opens_the_recognizer_so_configured(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = opened(ws)
        updated = configure(ws, {"transcription": {"model": "whisper-1", "language": "en"},
                                 "turn_detection": {"type": "server_vad", "silence_duration_ms": 700}})
        assert updated == {"type": "session.updated", "event_id": f"event_{prefix}00002", "session": {
            "type": "transcription", "object": "realtime.transcription_session", "id": f"sess_{prefix}",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                                "transcription": {"model": "whisper-1", "language": "en", "prompt": ""},
                                "turn_detection": {"type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
                                                   "silence_duration_ms": 700},
                                "noise_reduction": None}},
            "include": None}}
        assert fake.streams == {}  # nothing opened before audio
        append(ws, b"\0\0" * 2400)
        sync(ws)
    (open_header, _), (audio_header, payload) = fake.frames[:2]
    assert {k: open_header[k] for k in ("op", "language", "interim", "silence_ms")} == {
        "op": "open", "language": "en", "interim": True, "silence_ms": 700}
    # 100 ms at 24 kHz -> at most 1600 float32 samples at 16 kHz (the resampler holds back its delay)
    assert audio_header["op"] == "audio" and 1400 * 4 < len(payload) <= 1600 * 4


def test_server_vad_utterance_gives_openais_events_in_order(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = opened(ws)
        append(ws, b"\0\0" * 24000)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.25, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "Hello wor", "stable": "Hello", "start": 0.25, "end": 0.8},
                              {"ev": "final", "utterance": 0, "text": "Hello world.", "start": 0.25, "end": 1.05, "language": "en"})
        item = f"item_{prefix}0001"
        got = [receive(ws) for _ in range(6)]
    assert got == [
        {"type": "input_audio_buffer.speech_started", "event_id": f"event_{prefix}00003", "audio_start_ms": 250,
         "item_id": item},
        {"type": "conversation.item.input_audio_transcription.delta", "event_id": f"event_{prefix}00004",
         "item_id": item, "content_index": 0, "delta": "Hello"},
        {"type": "input_audio_buffer.speech_stopped", "event_id": f"event_{prefix}00005", "audio_end_ms": 1050,
         "item_id": item},
        {"type": "input_audio_buffer.committed", "event_id": f"event_{prefix}00006", "previous_item_id": None,
         "item_id": item},
        {"type": "conversation.item.input_audio_transcription.delta", "event_id": f"event_{prefix}00007",
         "item_id": item, "content_index": 0, "delta": " world."},
        {"type": "conversation.item.input_audio_transcription.completed", "event_id": f"event_{prefix}00008",
         "item_id": item, "content_index": 0, "transcript": "Hello world.", "usage": {"type": "duration",
                                                                                        "seconds": 0.8}}]


def test_manual_commit_is_committed_at_once_and_completed_after_its_finalize(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = manual_turn_started(ws, client, fake, b"\0\0" * 24000)
        ws.send_json({"type": "input_audio_buffer.commit"})
        assert receive(ws) == {"type": "input_audio_buffer.committed", "event_id": f"event_{prefix}00004",
                               "previous_item_id": None, "item_id": f"item_{prefix}0001"}
        sync(ws)
        assert [h for h, _ in fake.frames if h["op"] == "finalize"] == [{"op": "finalize", "stream": "s1", "id": "m1"}]
        fake.play_from_thread(client,
                              {"ev": "final", "utterance": 0, "text": "Push to talk.", "start": 0.1, "end": 0.9, "language": "en"},
                              {"ev": "finalized", "id": "m1", "utterance": 0})
        delta, completed = receive(ws), receive(ws)
    assert (delta["delta"], completed["transcript"], completed["item_id"]) == (
        "Push to talk.", "Push to talk.", f"item_{prefix}0001")
    assert fake.frames[0][0]["silence_ms"] == 5000  # without VAD only a long pause cuts an utterance


def test_a_commit_of_less_than_100_ms_is_refused_as_openai_refuses_it(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = opened(ws)
        ws.send_json({"type": "input_audio_buffer.commit", "event_id": "evt_c"})  # before any audio
        assert receive(ws) == {"type": "error", "event_id": f"event_{prefix}00002", "error": {
            "type": "invalid_request_error", "code": "input_audio_buffer_commit_empty",
            "message": "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
                       "but buffer only has 0.00ms of audio.", "param": None, "event_id": "evt_c"}}
        append(ws, b"\0\0" * 1200)  # 50 ms
        ws.send_json({"type": "input_audio_buffer.commit"})
        assert receive(ws)["error"]["message"].endswith("buffer only has 50.00ms of audio.")
        sync(ws)
    assert [h["op"] for h, _ in fake.frames] == ["open", "audio", "close"]  # no finalize reached the recognizer


def test_clear_answers_cleared_and_the_utterance_it_dropped_is_never_transcribed(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        append(ws, b"\0\0" * 24000)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0})
        assert receive(ws)["type"] == "input_audio_buffer.speech_started"
        ws.send_json({"type": "input_audio_buffer.clear"})
        assert receive(ws)["type"] == "input_audio_buffer.cleared"
        sync(ws)
        fake.play_from_thread(client,
                              {"ev": "final", "utterance": 0, "text": "Dropped.", "start": 0.1, "end": 0.5, "language": "en"},
                              {"ev": "finalized", "id": "m1", "utterance": 0})
        sync(ws)  # nothing came before the answer to this
    assert [h for h, _ in fake.frames if h["op"] == "finalize"] == [{"op": "finalize", "stream": "s1", "id": "m1"}]


def test_g711_audio_is_decoded_at_8_khz(tmp_path):
    fake = FakeSidecar()
    tone = (0.3 * np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000)).astype(np.float32)
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        assert configure(ws, {"format": {"type": "audio/pcma"}})["session"]["audio"]["input"]["format"] == {
            "type": "audio/pcma"}
        append(ws, g711.alaw_encode(tone))
        sync(ws)
        stream = fake.the_stream()
        ws.send_json({"type": "input_audio_buffer.commit"})
        receive(ws)  # committed
        sync(ws)
    heard = fake.audio_sent(stream.id)
    assert 14500 < len(heard) <= 16000  # one second at 16 kHz (less the resampler's delay)
    assert abs(float(np.sqrt(np.mean(heard[2000:14000] ** 2))) - 0.3 / np.sqrt(2)) < 0.02


@pytest.mark.parametrize(("audio_input", "param"), [
    ({"format": {"type": "audio/pcmu"}}, "session.audio.input.format"),
    ({"transcription": {"language": "en"}}, "session.audio.input.transcription.language"),
    ({"turn_detection": {"type": "server_vad", "silence_duration_ms": 900}},
     "session.audio.input.turn_detection.silence_duration_ms"),
])
def test_what_the_recognizer_started_with_cannot_change_after_audio(tmp_path, audio_input, param):
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        append(ws, b"\0\0" * 2400)
        sync(ws)
        error = configure(ws, audio_input)["error"]
        assert (error["code"], error["param"], error["event_id"]) == ("invalid_value", param, "evt_client_1")
        assert error["message"].endswith("cannot change after audio was appended; open a new session to change it")
        # what may change, changes: VAD off, reported as such
        assert configure(ws, {"turn_detection": None})["session"]["audio"]["input"]["turn_detection"] is None


def test_bad_audio_events_are_errors_and_the_session_goes_on(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        ws.send_json({"type": "input_audio_buffer.append", "audio": "not base64!", "event_id": "evt_a"})
        error = receive(ws)["error"]
        assert (error["code"], error["param"], error["event_id"], error["message"]) == (
            "invalid_value", "audio", "evt_a", "input_audio_buffer.append.audio is not valid base64")
        ws.send_bytes(b"\0\0")
        assert receive(ws)["error"]["message"] == ("binary frames are not accepted; send input_audio_buffer.append "
                                                  "events with base64 audio")
        ws.send_text("{")
        assert receive(ws)["error"] == {"type": "invalid_request_error", "code": "bad_message",
                                        "message": "message is not valid JSON", "param": None, "event_id": None}
        append(ws, b"\0\0" * 2400)
        sync(ws)
        ws.send_json({"type": "input_audio_buffer.append", "audio": 5})
        assert receive(ws)["error"]["message"] == "input_audio_buffer.append.audio must be a base64 string"
    assert [h["op"] for h, _ in fake.frames] == ["open", "audio", "close"]


def test_an_error_about_an_event_names_the_events_own_id_before_and_after_the_first_audio(tmp_path):
    fake = FakeSidecar()
    unknown = ("event type 'response.create' is not supported by this transcription server; use one of: "
               "session.update, input_audio_buffer.append, input_audio_buffer.commit, input_audio_buffer.clear")
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        ws.send_json({"type": "response.create", "event_id": "evt_r1"})
        assert receive(ws)["error"] == {"type": "invalid_request_error", "code": "bad_message",
                                        "message": unknown, "param": None, "event_id": "evt_r1"}
        ws.send_json({"type": 7, "event_id": "evt_t"})
        assert receive(ws)["error"] == {"type": "invalid_request_error", "code": "bad_message",
                                        "message": 'an event needs a string "type"', "param": None,
                                        "event_id": "evt_t"}
        append(ws, b"\0\0" * 2400)
        ws.send_json({"type": "response.create", "event_id": "evt_r2"})
        assert receive(ws)["error"]["event_id"] == "evt_r2"
        ws.send_json({"type": "input_audio_buffer.append", "audio": [], "event_id": "evt_a"})
        assert receive(ws)["error"] == {"type": "invalid_request_error", "code": "bad_message",
                                        "message": "input_audio_buffer.append.audio must be a base64 string",
                                        "param": None, "event_id": "evt_a"}
        ws.send_json({"type": "input_audio_buffer.commit", "event_id": "evt_c", "item_id": "item_1"})
        assert receive(ws)["error"] == {"type": "invalid_request_error", "code": "bad_message", "message":
                                        "input_audio_buffer.commit.item_id is not a field of "
                                        "input_audio_buffer.commit; it takes: event_id",
                                        "param": None, "event_id": "evt_c"}
    assert [h["op"] for h, _ in fake.frames] == ["open", "audio", "close"]


@pytest.mark.parametrize("audio_first", [False, True], ids=["before-audio", "after-audio"])
def test_an_event_over_the_size_limit_closes_1009(tmp_path, audio_first):
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        if audio_first:
            append(ws, b"\0\0" * 2400)
            sync(ws)
        ws.send_json({"type": "input_audio_buffer.append", "audio": "A" * 1402200})
        assert close_code(ws) == (1009, ("event of 1402247 bytes; the limit is 1402197 (1048576 bytes of audio "
                                        "an append)"))


def test_a_language_the_recognizer_lacks_is_refused_at_the_update(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        error = configure(ws, {"transcription": {"language": "fr"}})["error"]
    assert (error["code"], error["message"]) == (
        "unsupported_language", "language 'fr' is not supported by the recognizer here (available: en)")


def test_a_conversation_session_is_refused_with_4400(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/realtime?model=gpt-realtime") as ws:
        error = receive(ws)
        assert error["error"]["code"] == "bad_request"
        assert close_code(ws) == (4400, ("intent: missing; this server runs transcription sessions only: connect "
                                         "to /v1/realtime?intent=transcription"))


def test_over_capacity_closes_1013_which_openai_python_retries(tmp_path):
    with dictation_client(tmp_path, max_dictation_streams=1) as client, client.websocket_connect(URL) as first:
        opened(first)
        with client.websocket_connect(URL) as second:
            error = receive(second)["error"]
            assert (error["type"], error["code"]) == ("server_error", "over_capacity")
            assert close_code(second) == (1013, "too many dictation streams (limit 1); try again later")


def test_no_recognizer_closes_1011(tmp_path):
    with make_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        assert receive(ws)["error"]["code"] == "engine_unavailable"
        assert close_code(ws)[0] == 1011


def test_a_recognizer_restart_is_not_an_error_for_the_client(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        append(ws, b"\0\0" * 2400)
        sync(ws)
        notice = ErrorEvent.of(GatewayError("the ASR sidecar restarted", code="asr_unavailable"))  # a restart's news
        client.portal.call(fake.the_stream().report, notice)
        sync(ws)  # the restart notice was not sent


def test_idle_before_any_audio_closes_4408(tmp_path):
    with dictation_client(tmp_path, idle_timeout_s=1) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        assert close_code(ws) == (4408, "no audio for 1 s")


def test_the_browser_subprotocol_pair_is_a_credential_answered_with_realtime(tmp_path):
    remote = ("198.51.100.9", 5000)
    with dictation_client(tmp_path, client=remote, server_mode=True, api_key=KEY) as client:
        with client.websocket_connect(URL, subprotocols=["realtime", f"openai-insecure-api-key.{KEY}",
                                                         "openai-beta.realtime-v1"]) as ws:
            assert ws.accepted_subprotocol == "realtime"
            opened(ws)
        with client.websocket_connect(URL, subprotocols=["realtime", "openai-insecure-api-key.wrong"]) as ws:
            assert ws.accepted_subprotocol == "realtime"  # a browser fails a handshake that echoes nothing
            with pytest.raises(WebSocketDisconnect) as closed:
                receive(ws)
            assert (closed.value.code, closed.value.reason) == (1008, "API key required")
        with client.websocket_connect(URL, headers={"Authorization": f"Bearer {KEY}"}) as ws:
            assert ws.accepted_subprotocol is None
            opened(ws)


@pytest.mark.parametrize(("query", "reason"), [
    ("intent=transcription&model=nova-3",
     "model: 'nova-3' is not served; use an OpenAI transcription model or tiny.en"),
    ("intent=transcription&voice=alloy", "voice: not a parameter here; known: intent, model"),
])
def test_a_query_parameter_that_cannot_be_honoured_closes_4400(tmp_path, query, reason):
    with dictation_client(tmp_path) as client, client.websocket_connect(f"/v1/realtime?{query}") as ws:
        assert receive(ws)["error"]["message"] == reason
        assert close_code(ws) == (4400, reason)


def test_the_prompt_and_keywords_open_the_recognizer_and_a_later_change_reaches_it(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        configure(ws, {"transcription": {"prompt": "Names from the screencast.", "keywords": ["ComfyUI"]}})
        append(ws, b"\0\0" * 2400)
        sync(ws)
        configure(ws, {"transcription": {"keywords": ["Siobhan", "Llanelli"]}})
        configure(ws, {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}})  # the same prompt
        sync(ws)
    assert [(h["op"], h["prompt"]) for h, _ in fake.frames if h["op"] in ("open", "configure")] == [
        ("open", "Names from the screencast. ComfyUI."),
        ("configure", "Names from the screencast. Siobhan, Llanelli.")]
