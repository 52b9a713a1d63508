"""ElevenLabs' HTTP text to speech (``/stream`` and the plain route) in process:
the audio of each format, the seed, ElevenLabs-shaped errors."""

from __future__ import annotations

import pytest

from gateway.audio import Encoding, encode
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.gateway.fronts.elevenlabs.reading import pcm_of
from tests.gateway.helpers import tts_client


@pytest.mark.parametrize("path", ["/v1/text-to-speech/alba/stream", "/v1/text-to-speech/alba"])
def test_pcm_is_the_engine_audio(tmp_path, path):
    with tts_client(tmp_path) as client:
        r = client.post(f"{path}?output_format=pcm_24000&optimize_streaming_latency=3",
                        json={"text": "Over HTTP.", "model_id": "eleven_multilingual_v2",
                              "voice_settings": {"speed": 1.0, "style": None}})
    assert r.status_code == 200
    assert r.headers["content-type"] == "audio/pcm;rate=24000;encoding=pcm_s16le"
    assert r.content == pcm_of("Over HTTP.")


def test_the_seed_is_the_engines_seed(tmp_path):
    with tts_client(tmp_path) as client:
        r = client.post("/v1/text-to-speech/alba/stream?output_format=pcm_24000", json={"text": "Seeded.", "seed": 7})
    assert r.content == encode(expected_audio("Seeded.", seed=7), Encoding.S16LE)


def test_mp3_by_default(tmp_path):
    from tests.support.media import ffmpeg_decode

    with tts_client(tmp_path) as client:
        r = client.post("/v1/text-to-speech/alba/stream", json={"text": "The default format."})
    assert (r.status_code, r.headers["content-type"]) == (200, "audio/mpeg")
    samples, rate = ffmpeg_decode(r.content, "mp3")
    assert rate == 44100 and abs(len(samples) / rate - len(expected_audio("The default format.")) / 24000) < 0.1


@pytest.mark.parametrize(("query", "body", "status", "detail"), [
    ("?output_format=opus_48000_64", {"text": "x"}, 400, {
        "status": "bad_request", "message": "output_format: 'opus_48000_64' is not supported; use one of: pcm_8000, "
        "pcm_16000, pcm_22050, pcm_24000, pcm_32000, pcm_44100, pcm_48000, ulaw_8000, alaw_8000, mp3_22050_32, "
        "mp3_44100_<kbps>"}),
    ("", {"model_id": "x"}, 400, {"status": "bad_request", "message": "text: required, a non-empty string"}),
    ("", {"text": "x", "seed": -1}, 400, {"status": "bad_request",
                                          "message": "seed: must be an integer between 0 and 4294967295"}),
    ("", {"text": "x" * 2001}, 413, {"status": "text_too_long", "message": "text: 2001 characters; the limit is 2000"}),
])
def test_errors_are_elevenlabs_shaped(tmp_path, query, body, status, detail):
    with tts_client(tmp_path) as client:
        r = client.post(f"/v1/text-to-speech/alba/stream{query}", json=body)
    assert (r.status_code, r.json()) == (status, {"detail": detail})


def test_not_json_is_a_bad_request(tmp_path):
    with tts_client(tmp_path) as client:
        r = client.post("/v1/text-to-speech/alba/stream", content=b"text=hello")
    assert (r.status_code, r.json()) == (400, {"detail": {"status": "bad_request", "message": "body: not valid JSON"}})


def test_over_capacity_is_503_with_retry_after(tmp_path):
    with tts_client(tmp_path, FakeTtsEngine(), max_tts_sessions=1) as client, client.websocket_connect("/v1/tts") as ws:
        ws.receive_json()  # ready: the one session there is
        r = client.post("/v1/text-to-speech/alba/stream", json={"text": "No room."})
    assert (r.status_code, r.headers["retry-after"], r.json()) == (503, "5", {"detail": {
        "status": "over_capacity", "message": "too many TTS sessions (limit 1); try again later"}})
