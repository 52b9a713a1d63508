"""Compressed audio end to end: a real `voxgate serve` with the real ASR
sidecar and tiny.en. Piper speech, encoded by FFmpeg (PyAV) in each format a
client may send, streamed into /v1/dictation or posted to
/v1/audio/transcriptions, gives the transcript the PCM / WAV path gives,
within one word per sentence."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from gateway.audio import Encoding, encode, write_wav
from gateway.client.dictation import DictationClient
from gateway.codecs.formats import InputEncoding
from gateway.codecs.g711 import alaw_encode, mulaw_encode
from tests.e2e.gateway_process import running_gateway
from tests.support.media import ffmpeg_file, opus_packets
from tests.support.speech import piper_say, resample, silence, word_errors

pytestmark = pytest.mark.slow

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
SENTENCES = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    """Two Piper sentences with pauses, at 48 kHz (every other rate is made from it)."""
    parts = []
    for text in (FIRST, SECOND):
        samples, rate = piper_say(text)
        parts.append(resample(samples, rate, 48000))
    return np.concatenate([silence(0.5, 48000), parts[0], silence(1.2, 48000), parts[1], silence(1.0, 48000)])


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def messages_for(encoding: InputEncoding, speech: np.ndarray) -> tuple[int | None, list[bytes]]:
    """(sample_rate parameter, binary messages) of ``speech`` in ``encoding``."""
    if encoding is InputEncoding.PCM_S16LE:
        return 16000, chunks(encode(resample(speech, 48000, 16000), Encoding.S16LE), 3200)
    if encoding in (InputEncoding.MULAW, InputEncoding.ALAW):
        law = mulaw_encode if encoding is InputEncoding.MULAW else alaw_encode
        return 8000, chunks(law(resample(speech, 48000, 8000)), 800)
    if encoding is InputEncoding.OPUS:
        return 16000, opus_packets(resample(speech, 48000, 16000), 16000)
    container = "webm" if encoding is InputEncoding.WEBM else "ogg"
    return None, chunks(ffmpeg_file(container, "libopus", speech, 48000), 997)  # cuts fall anywhere; its own rate


async def transcript(url: str, encoding: InputEncoding, speech: np.ndarray) -> tuple[list[str], list[dict]]:
    rate, messages = messages_for(encoding, speech)
    async with await DictationClient.connect(url, sample_rate=rate, encoding=encoding,  # type: ignore[arg-type]
                                             interim=False) as client:
        async def send() -> None:
            for message in messages:
                await client.send_audio(message)
                await asyncio.sleep(0)
            await client.end()

        sender = asyncio.create_task(send())
        events = [event async for event in client.events()]
        await sender
    assert client.close_code == 1000, events
    return [e["text"] for e in events if e["type"] == "final"], events


@pytest.fixture(scope="module")
def pcm_errors(server, speech) -> int:
    finals, _ = asyncio.run(transcript(server, InputEncoding.PCM_S16LE, speech))
    assert len(finals) == SENTENCES
    return word_errors(f"{FIRST} {SECOND}", " ".join(finals))[0]


@pytest.mark.parametrize("encoding", [InputEncoding.MULAW, InputEncoding.ALAW, InputEncoding.OPUS,
                                      InputEncoding.WEBM, InputEncoding.OGG])
async def test_each_encoding_transcribes_like_pcm(server, speech, pcm_errors, encoding):
    finals, events = await transcript(server, encoding, speech)
    assert len(finals) == SENTENCES, events
    errors, _ = word_errors(f"{FIRST} {SECOND}", " ".join(finals))
    assert abs(errors - pcm_errors) <= SENTENCES, (finals, errors, pcm_errors)
    assert not [e for e in events if e["type"] == "error"]


def file_of(kind: str, speech: np.ndarray) -> bytes:
    if kind == "wav":
        return write_wav(resample(speech, 48000, 22050), 22050)
    container, codec, rate = {"flac": ("flac", "flac", 44100), "mp3": ("mp3", "libmp3lame", 24000),
                              "ogg": ("ogg", "libopus", 48000), "webm": ("webm", "libopus", 48000),
                              "m4a": ("ipod", "aac", 44100)}[kind]
    return ffmpeg_file(container, codec, resample(speech, 48000, rate), rate)


@pytest.fixture(scope="module")
def wav_errors(server, speech) -> int:
    r = httpx.post(f"{server}/v1/audio/transcriptions", files={"file": ("a.wav", file_of("wav", speech))},
                   data={"model": "whisper-1"}, timeout=120)
    assert r.status_code == 200, r.text
    return word_errors(f"{FIRST} {SECOND}", r.json()["text"])[0]


@pytest.mark.parametrize("kind", ["flac", "mp3", "ogg", "webm", "m4a"])
def test_each_file_format_transcribes_like_wav(server, speech, wav_errors, kind):
    r = httpx.post(f"{server}/v1/audio/transcriptions", files={"file": (f"speech.{kind}", file_of(kind, speech))},
                   data={"model": "whisper-1", "response_format": "verbose_json"}, timeout=120)
    assert r.status_code == 200, r.text
    body = r.json()
    errors, _ = word_errors(f"{FIRST} {SECOND}", body["text"])
    assert abs(errors - wav_errors) <= SENTENCES, (body["text"], errors, wav_errors)
    assert body["duration"] == pytest.approx(len(speech) / 48000, abs=0.1)
