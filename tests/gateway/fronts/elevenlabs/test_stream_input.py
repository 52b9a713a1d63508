"""ElevenLabs' stream-input socket in process (TestClient) with the fake
engine: BOS, text chunks, flush and EOS onto the TTS session, exact audio in
each output format, alignment, isFinal and the close, and ElevenLabs-shaped
errors and refusals."""

from __future__ import annotations

import time

import pytest

from engines.base import EngineState
from gateway.codecs import g711
from gateway.codecs.formats import OutputFormat
from gateway.errors import close_reason
from gateway.tts.frames import FrameEncoder
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.gateway.fronts.elevenlabs.reading import STREAM, pcm_of, read_until_final
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive

BOS = {"text": " ", "voice_settings": {"speed": 1.0},
       "generation_config": {"chunk_length_schedule": [120, 160]}}


def test_text_then_eos_speaks_each_sentence_then_is_final_and_close_1000(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM + "?output_format=pcm_24000") as ws:
        ws.send_json(BOS)
        ws.send_json({"text": "Hello there. "})
        ws.send_json({"text": "How are", "try_trigger_generation": True})
        ws.send_json({"text": " you?"})
        ws.send_json({"text": ""})
        heard = read_until_final(ws)
        assert close_code(ws) == (1000, "")
    assert heard.audio == pcm_of("Hello there.", "How are you?")
    assert heard.chars == "Hello there. How are you?"  # a space between utterances, none in front
    assert heard.errors == []


def test_flush_speaks_the_buffer_without_ending_the_stream(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM + "?output_format=pcm_24000") as ws:
        ws.send_json(BOS)
        ws.send_json({"text": "no sentence end", "flush": True})
        ws.send_json({"text": "Then more. "})
        ws.send_json({"text": ""})
        heard = read_until_final(ws)
    assert heard.audio == pcm_of("no sentence end", "Then more.")


@pytest.mark.parametrize(("output_format", "fmt", "rate"), [
    ("pcm_16000", OutputFormat.PCM_S16LE, 16000), ("pcm_44100", OutputFormat.PCM_S16LE, 44100),
    ("ulaw_8000", OutputFormat.MULAW, 8000), ("alaw_8000", OutputFormat.ALAW, 8000),
])
def test_each_format_is_the_engine_audio_resampled_and_encoded(tmp_path, output_format, fmt, rate):
    text = "Resampled and encoded."
    with tts_client(tmp_path) as client, client.websocket_connect(f"{STREAM}?output_format={output_format}") as ws:
        ws.send_json({"text": text + " "})
        ws.send_json({"text": ""})
        heard = read_until_final(ws)
    encoder = FrameEncoder(24000, rate, fmt)
    frames = expected_audio(text).reshape(-1, 1920)
    expected = b"".join(data for frame in frames for data, _ in encoder.feed(frame)) + \
        b"".join(data for data, _ in encoder.finish())
    assert heard.audio == expected
    if fmt is OutputFormat.MULAW:
        assert len(g711.mulaw_decode(heard.audio)) == round(len(frames) * 1920 / 3)


def test_mp3_audio_decodes_to_the_utterances_length(tmp_path):
    from tests.support.media import ffmpeg_decode

    text = "Compressed for the web."
    with tts_client(tmp_path) as client, client.websocket_connect(f"{STREAM}?output_format=mp3_44100_128") as ws:
        ws.send_json({"text": text + " "})
        ws.send_json({"text": ""})
        heard = read_until_final(ws)
    samples, rate = ffmpeg_decode(heard.audio, "mp3")
    assert rate == 44100
    assert abs(len(samples) / rate - len(expected_audio(text)) / 24000) < 0.1  # MP3 pads a frame or so


def test_bad_messages_get_elevenlabs_errors_and_the_stream_goes_on(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM + "?output_format=pcm_24000") as ws:
        ws.send_text("{")
        assert receive(ws) == {"message": "message is not valid JSON", "error": "bad_message", "code": 400}
        ws.send_bytes(b"\0")
        assert receive(ws) == {"message": "binary messages are not accepted; send JSON text messages",
                               "error": "bad_message", "code": 400}
        ws.send_json({"text": "x" * 2001})
        assert receive(ws) == {"message": "text has 2001 characters; the limit is 2000 (split it into several "
                                          "messages)", "error": "text_too_long", "code": 413}
        ws.send_json({"text": "Still here. "})
        ws.send_json({"text": ""})
        assert read_until_final(ws).audio == pcm_of("Still here.")


def test_a_message_over_the_size_limit_closes_1009(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM) as ws:
        ws.send_text('{"text": "' + "é" * 7000 + '"}')
        assert close_code(ws) == (1009, "message of 14012 bytes; the limit is 12096")


@pytest.mark.parametrize(("query", "engine", "code", "close"), [
    ("?output_format=wav", FakeTtsEngine(), "bad_request", 4400),
    ("?inactivity_timeout=0", FakeTtsEngine(), "bad_request", 4400),
    ("", FakeTtsEngine(state=EngineState.LOADING), "engine_loading", 1013),
    ("", FakeTtsEngine(state=EngineState.MISSING, detail="no weights", hint="voxgate models pull pocket"),
     "engine_unavailable", 1011),
])
def test_refusals_are_an_error_message_and_the_errors_close_code(tmp_path, query, engine, code, close):
    with tts_client(tmp_path, engine) as client, client.websocket_connect(STREAM + query) as ws:
        error = receive(ws)
        assert error["error"] == code and set(error) == {"message", "error", "code"}
        assert close_code(ws) == (close, close_reason(error["message"]))


def test_over_capacity_is_refused_at_the_first_message_with_1013(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=1) as client, client.websocket_connect("/v1/tts") as native:
        receive(native)  # ready: the one session there is
        with client.websocket_connect(STREAM) as ws:
            ws.send_json(BOS)
            assert receive(ws) == {"message": "too many TTS sessions (limit 1); try again later",
                                   "error": "over_capacity", "code": 503}
            assert close_code(ws) == (1013, "too many TTS sessions (limit 1); try again later")


def test_no_first_message_within_inactivity_timeout_closes_4408(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM + "?inactivity_timeout=1") as ws:
        assert close_code(ws) == (4408, "no text received for 1 s (inactivity_timeout)")


def test_an_idle_stream_closes_4408_after_inactivity_timeout(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(STREAM + "?inactivity_timeout=1") as ws:
        ws.send_json(BOS)
        assert close_code(ws) == (4408, "idle: no message for 1 s (send keepalive to stay open)")


def test_the_voice_in_the_path_is_used_when_the_engine_has_it(tmp_path):
    engine = FakeTtsEngine()
    with tts_client(tmp_path, engine) as client:
        for voice_id, used in (("marius", "marius"), ("21m00Tcm4TlvDq8ikWAM", "alba")):
            with client.websocket_connect(f"/v1/text-to-speech/{voice_id}/stream-input") as ws:
                ws.send_json({"text": "Hi. "})
                ws.send_json({"text": ""})
                read_until_final(ws)
            assert engine.streams[-1].voice == used


def test_disconnecting_mid_utterance_cancels_the_engine_stream(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"Long one.": 500})
    with tts_client(tmp_path, engine) as client:
        with client.websocket_connect(STREAM + "?output_format=pcm_24000") as ws:
            ws.send_json({"text": "Long one. "})
            assert receive(ws)["audio"]
        for _ in range(500):  # the server runs on the client's own thread: give it turns
            if engine.streams[-1].closed:
                break
            time.sleep(0.01)
        assert engine.streams[-1].cancelled and engine.streams[-1].closed and engine.streams[-1].produced < 500
