"""Deepgram's /v1/speak in process (TestClient) with the fake TTS engine:
Metadata first, one Speak per word synthesized per sentence as it completes,
Flush -> Flushed, Clear -> Cleared with compute stopped, Close, G.711 output,
Warnings for bad messages and vendor-shaped refusals."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio import Encoding, encode
from gateway.codecs import g711
from gateway.fronts.deepgram.messages import model_uuid
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive


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


def test_metadata_first_then_words_become_sentences_and_flush_is_answered(tmp_path):
    engine = FakeTtsEngine()
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/speak?model=aura-2-thalia-en") as ws:
        metadata = receive(ws)
        assert metadata == {"type": "Metadata", "request_id": metadata["request_id"], "model_name": "pocket-alba",
                            "model_version": "voxgate", "model_uuid": model_uuid("pocket-alba")}
        for word in ("Hello ", "there. ", "How ", "are "):
            ws.send_json({"type": "Speak", "text": word})
        first, _ = b"", None
        while not first:  # the first sentence is synthesized before any Flush
            message = receive(ws)
            first = message if isinstance(message, bytes) else b""
        assert [s.text for s in engine.streams] == ["Hello there."]
        ws.send_json({"type": "Speak", "text": "you?"})
        ws.send_json({"type": "Flush"})
        audio, events = read_until(ws, "Flushed")
        assert events == [{"type": "Flushed", "sequence_id": 0}]
        assert [s.text for s in engine.streams] == ["Hello there.", "How are you?"]
        expected = np.concatenate([expected_audio("Hello there."), expected_audio("How are you?")])
        assert first + audio == encode(expected, Encoding.S16LE)
        ws.send_json({"type": "Close"})
        assert close_code(ws) == (1000, "")


def test_flush_with_nothing_buffered_is_answered_at_once_and_counts(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/speak") as ws:
        receive(ws)
        ws.send_json({"type": "Flush"})
        ws.send_json({"type": "Flush"})
        assert [receive(ws), receive(ws)] == [{"type": "Flushed", "sequence_id": 0},
                                              {"type": "Flushed", "sequence_id": 1}]


def test_clear_stops_synthesis_drops_queued_audio_and_answers_cleared(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"A long sentence.": 500})
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/speak") as ws:
        receive(ws)
        ws.send_json({"type": "Speak", "text": "A long sentence."})
        ws.send_json({"type": "Flush"})
        assert isinstance(receive(ws), bytes)
        ws.send_json({"type": "Clear"})
        _, events = read_until(ws, "Cleared")
        assert events == [{"type": "Cleared", "sequence_id": 1}]
        (stream,) = engine.streams
        assert stream.cancelled and stream.produced < 500
        produced = stream.produced
        ws.send_json({"type": "Flush"})  # the socket stays usable; nothing of the cleared text comes back
        assert receive(ws) == {"type": "Flushed", "sequence_id": 2}  # no audio frame before it
        assert stream.produced <= produced + 1  # a frame already being computed may finish, no more


@pytest.mark.parametrize("law", ["mulaw", "alaw"])
def test_g711_output_is_the_engine_audio_encoded(tmp_path, law):
    engine = FakeTtsEngine()
    with tts_client(tmp_path, engine) as client, \
            client.websocket_connect(f"/v1/speak?encoding={law}&sample_rate=24000") as ws:
        receive(ws)
        ws.send_json({"type": "Speak", "text": "Hi."})
        ws.send_json({"type": "Flush"})
        audio, _ = read_until(ws, "Flushed")
    encode_law = g711.mulaw_encode if law == "mulaw" else g711.alaw_encode
    assert audio == encode_law(expected_audio("Hi."))


def test_bad_messages_are_warnings_and_the_socket_goes_on(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect("/v1/speak") as ws:
        receive(ws)
        ws.send_json({"type": "Speak", "text": 5})
        assert receive(ws) == {"type": "Warning", "description": "Speak.text must be a string", "code": "bad_message",
                               "warn_code": "bad_message", "warn_msg": "Speak.text must be a string"}
        ws.send_bytes(b"\0\0")
        assert receive(ws)["description"] == ("binary messages are not accepted on /v1/speak; send Speak, Flush, "
                                              "Clear or Close")
        ws.send_json({"type": "Speak", "text": "x" * 2001})
        assert receive(ws)["code"] == "text_too_long"
        ws.send_json({"type": "Speak", "text": "Hi.", "voice": "alba"})
        assert receive(ws)["description"] == "Speak.voice: not a field of Speak; its fields are: text"
        ws.send_json({"type": "Flush"})
        assert receive(ws) == {"type": "Flushed", "sequence_id": 0}


def test_a_loading_engine_is_refused_retryable_1013(tmp_path):
    from engines.base import EngineState

    with tts_client(tmp_path, FakeTtsEngine(state=EngineState.LOADING)) as client, \
            client.websocket_connect("/v1/speak") as ws:
        assert receive(ws)["variant"] == "engine_loading"
        assert close_code(ws)[0] == 1013


def test_over_capacity_is_refused_1013(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=1) as client, client.websocket_connect("/v1/speak") as first:
        receive(first)
        with client.websocket_connect("/v1/speak") as second:
            assert receive(second)["variant"] == "over_capacity"
            assert close_code(second)[0] == 1013


def test_a_quiet_socket_outlives_the_idle_timeout_as_at_deepgram(tmp_path):
    """Agent frameworks keep /v1/speak open between answers and send nothing meanwhile."""
    import time

    with tts_client(tmp_path, idle_timeout_s=1) as client, client.websocket_connect("/v1/speak") as ws:
        receive(ws)
        time.sleep(2.5)  # more than twice VOXGATE_IDLE_TIMEOUT_S without a message
        ws.send_json({"type": "Speak", "text": "Still here."})
        ws.send_json({"type": "Flush"})
        audio, events = read_until(ws, "Flushed")
        assert events == [{"type": "Flushed", "sequence_id": 0}]
        assert audio == encode(expected_audio("Still here."), Encoding.S16LE)


def test_a_socket_quiet_for_the_hold_time_is_closed_4408(tmp_path, monkeypatch):
    from gateway.fronts.deepgram import held_text

    monkeypatch.setattr(held_text, "HOLD_IDLE_S", 0.5)
    with tts_client(tmp_path, idle_timeout_s=1) as client, client.websocket_connect("/v1/speak") as ws:
        receive(ws)
        assert close_code(ws) == (4408, "idle: no message for 1 s (send keepalive to stay open)")
