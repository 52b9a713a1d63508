"""The real generate path on the CPU: a tiny random OmniVoice, built offline in the
released layout, loaded by the package's own ``from_pretrained`` and driven through
the gateway (``/v1/tts`` over HTTP and the socket, ``/v1/audio/speech``, ``/v1/voices``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from engines.omnivoice.random_model import build_random_model
from gateway.app import create_app
from gateway.config import Settings
from tests.engines.omnivoice.fakes import wav_bytes
from tests.support.hosts import TEST_HOST
from tests.support.listeners import FakeListener

pytestmark = pytest.mark.slow

TEXT = "Hello there, this is a test. The second sentence follows it."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_model(tmp_path_factory.mktemp("omnivoice-model"))


@pytest.fixture
def client(tmp_path: Path, model_dir: Path) -> Iterator[TestClient]:
    settings = Settings(engines=("omnivoice",), tts_engine="omnivoice", data_dir=tmp_path,
                        omnivoice_model=str(model_dir), omnivoice_steps=4, allowed_hosts=(TEST_HOST,))
    with TestClient(create_app(settings, share_listener=FakeListener()), client=("127.0.0.1", 5000)) as c:
        for _ in range(600):
            if c.get("/health").status_code == 200:
                break
            time.sleep(0.1)
        yield c


def _pcm(text: str, client: TestClient, **body: object) -> bytes:
    r = client.post("/v1/tts", json={"text": text, "engine": "omnivoice", "format": "pcm_s16le", **body})
    assert r.status_code == 200, r.text
    assert (r.headers["x-sample-rate"], r.headers["x-encoding"]) == ("24000", "pcm_s16le")
    return r.content


def test_engines_lists_omnivoice_ready(client: TestClient) -> None:
    (engine,) = client.get("/v1/engines").json()["engines"]
    languages = engine.pop("languages")
    assert engine == {"kind": "tts", "default": True, "id": "omnivoice", "sample_rate": 24000,
                      "frame_samples": 1920, "can_clone": True, "default_voice": "female", "state": "ready",
                      "default_reason": "set by VOXGATE_TTS_ENGINE"}
    assert {"en", "zh", "de", "ja"} <= set(languages)


def test_http_speech_is_deterministic_for_a_seed(client: TestClient) -> None:
    first = _pcm(TEXT, client, seed=3)
    assert len(first) > 2 * 24000 // 2 and len(first) % 2 == 0  # two sentences, each at least 0.5 s
    assert np.abs(np.frombuffer(first, "<i2")).max() > 1000  # audible, not silence
    assert _pcm(TEXT, client, seed=3) == first


def test_the_socket_sends_the_same_audio_in_frames_of_at_most_80_ms(client: TestClient) -> None:
    expected = _pcm(TEXT, client, seed=5)
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
    assert len(_pcm("Good evening.", client, voice="male-british")) > 0
    assert len(list((tmp_path / "cache" / "omnivoice-prompts").glob("*.prompt"))) == 1  # its anchor, made once


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
    assert len(_pcm("Now in my voice.", client, voice="me")) > 0
    assert client.delete("/v1/voices/me?engine=omnivoice").status_code == 204
    assert "me" not in [v["id"] for v in client.get("/v1/voices?engine=omnivoice").json()["voices"]]
