"""Deepgram Flux TTS (/v2/speak) in process (TestClient) with an engine that
times its words: Connected, turns (SpeechStarted, audio, SpeechMetadata,
Flushed), Interrupt answered with the text heard, Configure, Close, Flux's
warnings and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio import Encoding, encode
from gateway.fronts.deepgram.messages import model_uuid
from tests.gateway.fakes import expected_audio
from tests.gateway.helpers import tts_client
from tests.gateway.tts.timed_fake import TimedFakeEngine
from tests.support.sockets import close_code, receive

URL = "/v2/speak?model=flux-alexis-en&encoding=linear16&sample_rate=24000"
NO_CONTROLS = {"pronunciations_applied": 0, "breaks_applied": 0, "pronunciation_warnings": 0}


def read_until(ws, kind: str) -> tuple[bytes, list[dict]]:
    """Audio and JSON messages up to and including the first message of ``kind``."""
    audio, events = b"", []
    while True:
        message = receive(ws)
        if isinstance(message, bytes):
            audio += message
            continue
        events.append(message)
        if message["type"] == kind:
            return audio, events


def connect(ws) -> dict:
    connected = receive(ws)
    assert connected == {"type": "Connected", "request_id": connected["request_id"], "model_name": "pocket-alba",
                         "model_version": "voxgate", "model_uuids": [model_uuid("pocket-alba")]}
    return connected


def test_a_turn_is_started_spoken_and_ended_with_its_metadata(tmp_path):
    engine = TimedFakeEngine()
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        for piece in ("Hello ", "there. ", "How are ", "you?"):
            ws.send_json({"type": "Speak", "text": piece})
        ws.send_json({"type": "Flush"})
        audio, events = read_until(ws, "Flushed")
        speech_id = events[0]["speech_id"]
        assert speech_id.startswith("dg_sp_") and len(speech_id) == 18
        assert events == [{"type": "SpeechStarted", "speech_id": speech_id},
                          {"type": "SpeechMetadata", "speech_id": speech_id, "audio_duration_ms": 5 * 80,
                           "input_character_count": 25, "billable_character_count": 25,
                           "controls_applied": NO_CONTROLS},
                          {"type": "Flushed", "speech_id": speech_id}]
        assert [s.text for s in engine.streams] == ["Hello there.", "How are you?"]
        words = np.concatenate([expected_audio("Hello there.")[:2 * 1920], expected_audio("How are you?")[:3 * 1920]])
        assert audio == encode(words, Encoding.S16LE)
        ws.send_json({"type": "Close"})
        _, events = read_until(ws, "SessionMetadata")
        assert events == [{"type": "SessionMetadata", "total_audio_duration_ms": 400,
                           "total_input_character_count": 25, "total_billable_character_count": 25}]
        assert close_code(ws) == (1000, "")


def test_interrupt_names_the_turns_text_heard_and_left(tmp_path):
    turn = "First sentence here. Then a much longer second sentence that goes on and on and on."
    second = "Then a much longer second sentence that goes on and on and on."
    engine = TimedFakeEngine(frame_delay_s=0.02, frames_by_text={second: 400})
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_json({"type": "Speak", "text": turn})
        ws.send_json({"type": "Flush"})
        audio, started = b"", receive(ws)
        while len(audio) < 2 * 1920 * 8:  # eight words sent: three of the first sentence, five of the second
            message = receive(ws)
            audio += message if isinstance(message, bytes) else b""
        # played: the first sentence (3 words, 240 ms), "Then a much" (3 more, 480 ms) and "longer" to its
        # midpoint (480-560 ms): heard
        ws.send_json({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 520}})
        _, events = read_until(ws, "SpeechInterrupted")
        interrupted = events[-1]
        speech_id = started["speech_id"]
        assert interrupted == {
            "type": "SpeechInterrupted", "audio_played_ms": 520,
            "text_spoken": "First sentence here. Then a much longer",
            "text_remaining": " second sentence that goes on and on and on.",
            "metadata": {"speech_id": speech_id, "audio_duration_ms": interrupted["metadata"]["audio_duration_ms"],
                         "input_character_count": len(turn), "billable_character_count": len(turn),
                         "controls_applied": NO_CONTROLS}}
        assert interrupted["text_spoken"] + interrupted["text_remaining"] == turn
        assert interrupted["metadata"]["audio_duration_ms"] >= 640
        assert engine.streams[1].cancelled and engine.streams[1].produced < 400
        # the session goes on; offsets count on from where the interrupt left it
        ws.send_json({"type": "Speak", "text": "Next one."})
        ws.send_json({"type": "Flush"})
        _, events = read_until(ws, "Flushed")
        assert [e["type"] for e in events] == ["SpeechStarted", "SpeechMetadata", "Flushed"]
        # "Next" 520-600 ms played, "one." (600-680 ms) short of its midpoint
        ws.send_json({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 520 + 80}})
        _, events = read_until(ws, "SpeechInterrupted")
        assert (events[-1]["text_spoken"], events[-1]["text_remaining"]) == ("Next", " one.")


def test_interrupt_without_an_offset_reports_the_audio_sent_and_no_text(tmp_path):
    engine = TimedFakeEngine()
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_json({"type": "Speak", "text": "One two three."})
        ws.send_json({"type": "Flush"})
        _, events = read_until(ws, "Flushed")
        ws.send_json({"type": "Interrupt"})
        _, interrupted = read_until(ws, "SpeechInterrupted")
        assert interrupted == [{"type": "SpeechInterrupted", "audio_played_ms": 240,
                                "metadata": {"speech_id": events[0]["speech_id"], "audio_duration_ms": 240,
                                             "input_character_count": 14, "billable_character_count": 14,
                                             "controls_applied": NO_CONTROLS}}]
        ws.send_json({"type": "Interrupt"})  # that turn is answered for; none is left
        assert receive(ws) == {"type": "Warning", "code": "NO_ACTIVE_SPEECH",
                               "description": "Interrupt ignored: no turn since the last Interrupt"}


def test_warnings_for_what_has_nothing_to_act_on(tmp_path):
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_json({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 0}})
        assert receive(ws) == {"type": "Warning", "code": "NO_AUDIO_GENERATED",
                               "description": "Interrupt ignored: this session has produced no audio yet"}
        ws.send_json({"type": "Flush"})
        assert receive(ws) == {"type": "Warning", "code": "NO_ACTIVE_SPEECH",
                               "description": "Flush with no turn open: nothing to flush"}
        ws.send_json({"type": "Speak", "text": "Hi."})
        ws.send_json({"type": "Flush"})
        read_until(ws, "Flushed")
        ws.send_json({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": 81}})
        assert receive(ws) == {"type": "Warning", "code": "INVALID_INTERRUPT_OFFSET",
                               "description": "Interrupt ignored: cancel.played_ms 81 is past the 80 ms of audio "
                                              "this session sent"}
        ws.send_json({"type": "Speak", "text": "   "})
        ws.send_json({"type": "Flush"})
        _, events = read_until(ws, "Flushed")
        speech_id = events[-1]["speech_id"]
        assert events == [{"type": "Warning", "code": "NO_SYNTHESIZABLE_TEXT",
                           "description": "the turn's text was empty or whitespace: no audio"},
                          {"type": "SpeechMetadata", "speech_id": speech_id, "audio_duration_ms": 0,
                           "input_character_count": 3, "billable_character_count": 3,
                           "controls_applied": NO_CONTROLS},
                          {"type": "Flushed", "speech_id": speech_id}]


@pytest.mark.parametrize(("configure", "answer"), [
    ({"speed": 1.0}, {"type": "ConfigureSuccess", "applied": {"speed": 1.0}}),
    ({}, {"type": "ConfigureSuccess", "applied": {}}),
    ({"speed": 1.2}, {"type": "ConfigureFailure", "code": "SPEED_NOT_SUPPORTED", "field": "speed",
                      "description": "speed: the engines here speak at speed 1.0 only"}),
    ({"speed": 2.0}, {"type": "ConfigureFailure", "code": "SPEED_OUT_OF_RANGE", "field": "speed", "value": 2.0,
                      "description": "speed: 2 is outside 0.5 to 1.5"}),
    ({"speed": 1.03}, {"type": "ConfigureFailure", "code": "SPEED_INCREMENT_INVALID", "field": "speed",
                       "value": 1.03, "description": "speed: 1.03 is not a multiple of 0.05"}),
])
def test_configure_is_answered_at_once(tmp_path, configure, answer):
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_json({"type": "Configure", **configure})
        assert receive(ws) == answer


@pytest.mark.parametrize(("message", "error"), [
    ({"type": "Speak"}, {"type": "Error", "code": "MESSAGE-0000", "description": "Speak.text must be a string"}),
    ({"type": "Shout"}, {"type": "Error", "code": "MESSAGE-0000", "description":
                         "type: 'Shout' is not a /v2/speak message; send one of Speak, Flush, Interrupt, Clear, "
                         "Configure, Close"}),
    ({"type": "Interrupt", "playback_offset": {"type": "time_ms", "value": -5}},
     {"type": "Error", "code": "MESSAGE-0000",
      "description": "Interrupt.playback_offset.value must be a whole number of milliseconds, 0 or more"}),
    ({"type": "Configure", "volume": 2},
     {"type": "Error", "code": "MESSAGE-0000",
      "description": "Configure.volume: not a field of Configure here; its fields: speed"}),
    ({"type": "Flush", "id": "x"},
     {"type": "Error", "code": "MESSAGE-0000",
      "description": "Flush.id: not a field of Flush here; its fields: none besides type"}),
    ({"type": "Speak", "text": "x" * 2001},
     {"type": "Error", "code": "DATA-0000",
      "description": "Speak.text has 2001 characters; the limit is 2000 (split it into several messages)"}),
])
def test_a_bad_message_is_answered_with_an_error_and_the_socket_goes_on(tmp_path, message, error):
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect(URL) as ws:
        connect(ws)
        ws.send_json(message)
        assert receive(ws) == error
        ws.send_json({"type": "Configure"})
        assert receive(ws) == {"type": "ConfigureSuccess", "applied": {}}


@pytest.mark.parametrize(("query", "description"), [
    ("encoding=linear16", "model: required (flux-{voice}-{language}, e.g. flux-alexis-en)"),
    ("model=aura-2-thalia-en", ("model: 'aura-2-thalia-en' is an Aura voice; /v2/speak takes Flux voices (flux-*), "
                               "/v1/speak takes Aura ones")),
    ("model=flux-alexis-en&speed=1.2", "speed: 1.2 is not supported; the engines here speak at speed 1.0 only"),
    ("model=flux-alexis-en&expressivity=1", ("expressivity: '1' is not supported; the engines here have no "
                                            "expressivity control (use 0 or leave it out)")),
    ("model=flux-alexis-en&sample_rate=22050", ("sample_rate: '22050' is not one of 8000, 16000, 24000, 32000, "
                                               "44100, 48000")),
    ("model=flux-alexis-en&bit_rate=64000", ("bit_rate: not a parameter here; known: model, encoding, sample_rate, "
                                            "speed, expressivity, mip_opt_out, tag")),
    ("model=nova-3", "model: 'nova-3' is not served here; use flux-* (the default voice) or one of: alba, marius"),
])
def test_a_query_that_cannot_be_honoured_is_refused(tmp_path, query, description):
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect(f"/v2/speak?{query}") as ws:
        assert receive(ws) == {"type": "Error", "code": "bad_request", "description": description}
        assert close_code(ws)[0] == 4400


def test_the_query_the_sdk_and_the_frameworks_send_is_taken(tmp_path):
    query = "model=marius&encoding=mulaw&sample_rate=8000&speed=1.0&expressivity=0&mip_opt_out=false&tag=a&tag=b"
    with tts_client(tmp_path, TimedFakeEngine()) as client, client.websocket_connect(f"/v2/speak?{query}") as ws:
        assert receive(ws)["model_name"] == "pocket-marius"
        ws.send_json({"type": "Configure"})
        assert receive(ws) == {"type": "ConfigureSuccess", "applied": {"speed": 1.0}}
        ws.send_json({"type": "Speak", "text": "Hi."})
        ws.send_json({"type": "Flush"})
        audio, _ = read_until(ws, "Flushed")
        assert len(audio) == 640  # 80 ms of mu-law at 8 kHz
