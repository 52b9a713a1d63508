"""The gateway over the tiny random OmniVoice (engines/omnivoice/random_model.py), for the slow tests.

``open_client`` starts the app with OmniVoice as its only engine and waits (bounded)
until it reports healthy; ``speech`` asks ``POST /v1/tts`` for raw 16-bit PCM, and
``socket_speech`` sends one ``speak`` on the ``/v1/tts`` socket.
``assert_different`` is how the tests tell that an input changed the audio: not
just some bytes, but a difference with at least a tenth of the audio's own energy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings
from tests.support.hosts import TEST_HOST
from tests.support.listeners import FakeListener

STEPS = 4  # decoding steps of the tests' gateway (VOXGATE_OMNIVOICE_STEPS)
HEALTHY_WITHIN_S = 60.0


@contextmanager
def open_client(data_dir: Path, model_dir: Path, steps: int = STEPS) -> Iterator[TestClient]:
    settings = Settings(engines=("omnivoice",), tts_engine="omnivoice", data_dir=data_dir,
                        omnivoice_model=str(model_dir), omnivoice_steps=steps, allowed_hosts=(TEST_HOST,))
    with TestClient(create_app(settings, share_listener=FakeListener()), client=("127.0.0.1", 5000)) as client:
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, f"not healthy within {HEALTHY_WITHIN_S:g} s: {client.get('/health').text}"
            time.sleep(0.1)
        yield client


def speech(client: TestClient, text: str, **body: object) -> bytes:
    """``text`` spoken by OmniVoice as little-endian 16-bit PCM at 24 kHz."""
    r = client.post("/v1/tts", json={"text": text, "engine": "omnivoice", "format": "pcm_s16le", **body})
    assert r.status_code == 200, r.text
    assert (r.headers["x-sample-rate"], r.headers["x-encoding"]) == ("24000", "pcm_s16le")
    return r.content


def socket_speech(client: TestClient, **speak: object) -> bytes:
    """One ``speak`` on the ``/v1/tts`` socket (OmniVoice, 16-bit PCM at 24 kHz): its audio frames, joined."""
    with client.websocket_connect("/v1/tts?engine=omnivoice") as ws:
        assert ws.receive_json()["type"] == "ready"
        ws.send_json({"type": "speak", "id": "u", **speak})
        assert ws.receive_json()["type"] == "start"
        chunks = []
        while (message := ws.receive()).get("bytes") is not None:
            chunks.append(message["bytes"])
        end = json.loads(message["text"])
    assert (end["type"], end["id"], end["frames"]) == ("end", "u", len(chunks)), end
    return b"".join(chunks)


def samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, "<i2").astype(np.float64)


def assert_same_audio(served: bytes, expected: bytes) -> None:
    """The same samples, each within one 16-bit step: float sums may round the
    other way when torch splits them over another number of threads (the tests
    around it run the engine with other thread settings), and one such rounding
    moves a sample by one step; any other input moves it by thousands."""
    a, b = samples(served), samples(expected)
    assert len(a) == len(b), f"{len(a)} samples served, {len(b)} expected"
    worst = float(np.abs(a - b).max()) if len(a) else 0.0
    assert worst <= 1.0, f"samples differ by up to {worst:.0f} steps"


def assert_different(first: bytes, second: bytes) -> None:
    """The two clips differ in length, or their difference has >= 10% of the first one's RMS."""
    a, b = samples(first), samples(second)
    if len(a) != len(b):
        return
    rms = float(np.sqrt(np.mean(a ** 2)))
    difference = float(np.sqrt(np.mean((a - b) ** 2)))
    assert rms > 0 and difference >= 0.1 * rms, f"difference RMS {difference:.1f} vs audio RMS {rms:.1f}"
