"""What the agent-framework tests of the Deepgram front share: one real `voxgate
serve --engines asr,piper` (the ASR sidecar with tiny.en, Piper's bundled voice),
Piper speech to hear, and a check that what a framework got is speech of the text
(the gateway's own file transcription of it)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from gateway.audio import write_wav
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence
from tests.support.speech import word_errors as edit_errors
from tests.support.spoken import expand_contractions

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
MAX_WORD_ERRORS = 2  # per sentence of 8-9 words; tiny.en on Piper: ~10% WER on average
KEY = "unused-on-loopback"
IDLE_TIMEOUT_S = 2  # VOXGATE_IDLE_TIMEOUT_S: short, so a test can wait out a quiet socket


@pytest.fixture(scope="module", name="server")
def gateway_server(tmp_path_factory):
    """The gateway's base URL (http://127.0.0.1:port)."""
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_TTS_ENGINE": "piper", "VOXGATE_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S)}
    with running_gateway(tmp_path_factory.mktemp("data"), "asr,piper", env=env) as gw:
        yield gw.url


def word_errors(want: str, got: str) -> int:
    """Words ``got`` has wrong against ``want`` (a contraction written out is not wrong)."""
    return edit_errors(expand_contractions(want), expand_contractions(got))[0]


def speech(*texts: str, tail_s: float = 1.5, multiple_of: int = 2) -> bytes:
    """16 kHz 16-bit Piper speech: 0.5 s of silence, then each text followed by ``tail_s`` of it."""
    parts = [silence(0.5)]
    for text in texts:
        samples, rate = piper_say(text)
        parts += [resample(samples, rate), silence(tail_s)]
    pcm = pcm16(np.concatenate(parts))
    return pcm[:len(pcm) // multiple_of * multiple_of]


def piper_seconds(text: str) -> float:
    """How long Piper's bundled voice takes to say ``text``."""
    samples, rate = piper_say(text)
    return len(samples) / rate


async def transcribe(server: str, pcm: bytes, rate: int) -> str:
    """What the gateway's ASR hears in 16-bit mono ``pcm`` (POST /v1/audio/transcriptions)."""
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    async with httpx.AsyncClient(base_url=server, timeout=120) as http:
        response = await http.post("/v1/audio/transcriptions", data={"language": "en"},
                                   files={"file": ("speech.wav", write_wav(samples, rate), "audio/wav")})
    response.raise_for_status()
    return str(response.json()["text"])
