"""The real generate path on the CPU: a tiny random OmniVoice, built offline in the
released layout, loaded by the package's own ``from_pretrained`` and driven through
the gateway (``/v1/tts`` over HTTP and the socket, ``/v1/audio/speech``, ``/v1/voices``).

Its codec follows the codes (tests/engines/omnivoice/test_random_model.py), so every
input the gateway passes on (seed, steps, text, voice) must change the audio, and the
same inputs must give the same bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from tests.engines.omnivoice.fakes import wav_bytes
from tests.engines.omnivoice.tiny_gateway import STEPS, assert_different, open_client, speech

pytestmark = pytest.mark.slow

TEXT = "Hello there, this is a test. The second sentence follows it."


@pytest.fixture
def client(tmp_path: Path, tiny_model_dir: Path) -> Iterator[TestClient]:
    with open_client(tmp_path, tiny_model_dir) as c:
        yield c


def test_engines_lists_omnivoice_ready(client: TestClient) -> None:
    (engine,) = client.get("/v1/engines").json()["engines"]
    languages = engine.pop("languages")
    assert engine == {"kind": "tts", "default": True, "id": "omnivoice", "sample_rate": 24000,
                      "frame_samples": 1920, "can_clone": True, "default_voice": "female", "state": "ready",
                      "options": ["seed", "language", "instruct"], "clone_uses_transcript": True, "default_reason": "set by VOXGATE_TTS_ENGINE"}
    assert {"en", "zh", "de", "ja"} <= set(languages)


def test_the_same_seed_repeats_bit_for_bit_and_another_seed_differs(client: TestClient) -> None:
    first = speech(client, TEXT, seed=3)
    assert len(first) > 2 * 24000 // 2 and len(first) % 2 == 0  # two sentences, each at least 0.5 s
    assert np.abs(np.frombuffer(first, "<i2")).max() > 1000  # audible, not silence
    assert speech(client, TEXT, seed=3) == first
    assert_different(first, speech(client, TEXT, seed=4))


def test_the_text_changes_the_audio(client: TestClient) -> None:
    first = speech(client, "Hello there, this is a test.", seed=3)
    second = speech(client, "Hello there, this is a best.", seed=3)
    assert len(first) == len(second)  # the same estimated duration: only the content can tell them apart
    assert_different(first, second)


def test_the_step_setting_changes_the_audio(client: TestClient, tmp_path: Path, tiny_model_dir: Path) -> None:
    at_default = speech(client, TEXT, seed=3)
    with open_client(tmp_path / "more-steps", tiny_model_dir, steps=2 * STEPS) as more_steps:
        at_double = speech(more_steps, TEXT, seed=3)
    assert len(at_double) == len(at_default)
    assert_different(at_default, at_double)


def test_the_socket_sends_the_same_audio_in_frames_of_at_most_80_ms(client: TestClient) -> None:
    expected = speech(client, TEXT, seed=5)
    with client.websocket_connect("/v1/tts?engine=omnivoice") as ws:
        ready = ws.receive_json()
        assert (ready["engine"], ready["voice"], ready["sample_rate"], ready["frame_samples"]) == (
            "omnivoice", "female", 24000, 1920)
        ws.send_json({"type": "speak", "text": TEXT, "id": "a", "seed": 5})
        assert ws.receive_json() == {"type": "start", "id": "a", "text": TEXT}
        chunks = []
        while True:
            message = ws.receive()
            if message.get("bytes") is not None:
                chunks.append(message["bytes"])
                continue
            end = json.loads(message["text"])
            break
    assert end["type"] == "end" and end["id"] == "a" and end["frames"] == len(chunks)
    assert max(len(c) for c in chunks) == 2 * 1920
    assert b"".join(chunks) == expected


def test_openai_speech_with_model_omnivoice(client: TestClient) -> None:
    r = client.post("/v1/audio/speech", json={"model": "omnivoice", "input": "Good morning.", "voice": "alloy",
                                              "response_format": "wav"})
    assert r.status_code == 200
    assert r.content[:4] == b"RIFF" and r.headers["content-type"] == "audio/wav"
    assert len(r.content) > 44 + 2 * 2400


def test_a_designed_voice_by_name(client: TestClient, tmp_path: Path) -> None:
    british = speech(client, "Good evening.", voice="male-british", seed=2)
    assert len(list((tmp_path / "cache" / "omnivoice-prompts").glob("*.prompt"))) == 1  # its anchor, made once
    assert speech(client, "Good evening.", voice="male-british", seed=2) == british
    assert len(list((tmp_path / "cache" / "omnivoice-prompts").glob("*.prompt"))) == 1
    assert_different(british, speech(client, "Good evening.", voice="female", seed=2))


def test_clone_needs_ref_text_here_and_works_with_it(client: TestClient, tmp_path: Path) -> None:
    wav = wav_bytes(2.0, 16000)
    r = client.post("/v1/voices", data={"id": "me", "engine": "omnivoice"},
                    files={"file": ("me.wav", wav, "audio/wav")})
    assert r.status_code == 400
    assert r.json()["detail"] == (
        "ref_text: required for OmniVoice voices on this server: no Whisper model is on this machine to transcribe "
        "the clip. send the clip's transcript as the form field ref_text, or set VOXGATE_OMNIVOICE_ASR_MODEL to a "
        "local Whisper model directory (transformers format)")
    assert not (tmp_path / "voices" / "uploads" / "omnivoice" / "me.wav").exists()
    r = client.post("/v1/voices", data={"id": "me", "engine": "omnivoice", "ref_text": "Some words in my clip."},
                    files={"file": ("me.wav", wav, "audio/wav")})
    assert r.status_code == 201, r.text
    assert r.json() == {"voice": {"id": "me", "engine": "omnivoice", "name": "me", "language": "",
                                  "source": "cloned"}}
    assert len(list((tmp_path / "cache" / "omnivoice-prompts").glob("*.prompt"))) == 1  # the clone's prompt
    mine = speech(client, "Now in my voice.", voice="me", seed=6)
    assert_different(mine, speech(client, "Now in my voice.", seed=6))
    assert client.delete("/v1/voices/me?engine=omnivoice").status_code == 204
    assert "me" not in [v["id"] for v in client.get("/v1/voices?engine=omnivoice").json()["voices"]]


def test_two_clips_make_two_voices(client: TestClient) -> None:
    for voice_id, seed in (("one", 1), ("two", 2)):  # two noise clips of the same length and level
        r = client.post("/v1/voices", data={"id": voice_id, "engine": "omnivoice", "ref_text": "Words in a clip."},
                        files={"file": (f"{voice_id}.wav", wav_bytes(2.0, 16000, seed=seed), "audio/wav")})
        assert r.status_code == 201, r.text
    assert_different(speech(client, "Who is speaking?", voice="one", seed=6),
                     speech(client, "Who is speaking?", voice="two", seed=6))


LANGUAGE_ERROR = ("language: 'klingon' is not a language OmniVoice knows; use an ISO 639 code (en, zh, ja, de, ...) "
                  "or an English name (English, German, ...)")


def test_a_language_the_package_does_not_know_is_refused_on_both_paths(client: TestClient) -> None:
    r = client.post("/v1/tts", json={"text": "Hi.", "engine": "omnivoice", "language": "klingon"})
    assert (r.status_code, r.json()) == (400, {"detail": LANGUAGE_ERROR, "code": "bad_request"})
    with client.websocket_connect("/v1/tts?engine=omnivoice") as ws:
        ws.receive_json()
        ws.send_json({"type": "speak", "text": "Hi.", "id": "k", "language": "klingon"})
        assert ws.receive_json() == {"type": "error", "code": "bad_request", "message": LANGUAGE_ERROR,
                                     "retryable": False, "id": "k"}
