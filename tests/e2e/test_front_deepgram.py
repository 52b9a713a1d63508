"""The Deepgram front end to end with Deepgram's own Python SDK (deepgram-sdk 7,
pointed at voxgate through its environment override): a real `voxgate serve`
with the real ASR sidecar and tiny.en transcribing Piper speech, and the real
Pocket engine (random weights) behind /v1/speak."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.e2e.gateway_process import running_gateway
from tests.e2e.tiny_pocket import serving_pocket
from tests.support.speech import pcm16, piper_say, resample, silence, wer

# deepgram-sdk 7 imports websockets' legacy client API, which warns on import
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:websockets.*deprecated:DeprecationWarning")]
deepgram = pytest.importorskip("deepgram", reason="deepgram-sdk is not installed (pip install 'voxgate[test]')")

SENTENCE = "It's easy to tell the depth of a well."
MAX_WER = 0.25  # tiny.en on Piper: ~10% on average


def client_for(url: str):
    from deepgram import AsyncDeepgramClient, DeepgramClientEnvironment

    ws = url.replace("http://", "ws://")
    env = DeepgramClientEnvironment(base=url, production=ws, agent=ws, agent_rest=url)
    return AsyncDeepgramClient(api_key="unused-on-loopback", environment=env)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url


def speech(text: str, tail_s: float) -> bytes:
    samples, rate = piper_say(text)
    return pcm16(np.concatenate([silence(0.3), resample(samples, rate), silence(tail_s)]))


async def stream(url: str, pcm: bytes, *, finalize: bool, before_close: str | None = None, **query: str) -> list:
    """Send ``pcm`` in real time (100 ms chunks), optionally Finalize, then CloseStream
    (once a message of type ``before_close`` has come, if one is named: a loaded machine
    may still be decoding when the audio ends); every message the SDK parsed, in order."""
    got: list = []
    async with client_for(url).listen.v1.connect(model="nova-3", encoding="linear16", sample_rate="16000",
                                                 **query) as conn:
        came = asyncio.Event()

        async def read() -> None:
            async for message in conn:
                got.append(message)
                if message.type == before_close:
                    came.set()

        reader = asyncio.create_task(read())
        for i in range(0, len(pcm), 3200):
            await conn.send_media(pcm[i:i + 3200])
            await asyncio.sleep(0.1)
        if finalize:
            await conn.send_finalize()
        if before_close is not None:
            await asyncio.wait_for(came.wait(), 60)
        await conn.send_close_stream()
        await asyncio.wait_for(reader, 60)
    return got


def kinds(messages: list) -> list[str]:
    return [m.type for m in messages]


async def test_sdk_live_transcription_finals_match_and_close_stream_ends_with_metadata(server):
    from deepgram.listen.v1.types import ListenV1Metadata, ListenV1Results

    pcm = speech(SENTENCE, 1.5)
    got = await stream(server, pcm, finalize=False, before_close="UtteranceEnd", interim_results="true",
                       vad_events="true", utterance_end_ms="1000", endpointing="300")
    results = [m for m in got if isinstance(m, ListenV1Results)]
    finals = [r for r in results if r.is_final]
    assert len(finals) == 1 and finals[0].speech_final and not finals[0].from_finalize
    assert wer(SENTENCE, finals[0].channel.alternatives[0].transcript) <= MAX_WER
    interims = [r.channel.alternatives[0].transcript for r in results if not r.is_final]
    assert interims, "interim_results=true gives interim Results"
    assert kinds(got)[0] == "SpeechStarted" and kinds(got)[-2:] == ["UtteranceEnd", "Metadata"]
    metadata = got[-1]
    assert isinstance(metadata, ListenV1Metadata) and metadata.channels == 1
    assert metadata.duration == round(len(pcm) / 32000, 3)


async def test_sdk_finalize_yields_exactly_one_from_finalize_result(server):
    from deepgram.listen.v1.types import ListenV1Results

    # no trailing silence: the utterance is still open when Finalize comes
    got = await stream(server, speech(SENTENCE, 0.0), finalize=True)
    results = [m for m in got if isinstance(m, ListenV1Results)]
    answered = [r for r in results if r.from_finalize]
    assert len(answered) == 1 and answered[0].is_final
    assert wer(SENTENCE, answered[0].channel.alternatives[0].transcript) <= MAX_WER
    assert kinds(got)[-1] == "Metadata"


async def test_sdk_finalize_with_nothing_open_still_gets_its_result(server):
    from deepgram.listen.v1.types import ListenV1Results

    got = await stream(server, pcm16(silence(1.0)), finalize=True)
    answered = [m for m in got if isinstance(m, ListenV1Results) and m.from_finalize]
    assert len(answered) == 1 and answered[0].channel.alternatives[0].transcript == ""


async def test_interim_hello_then_hello_world_then_silence_gives_hello_world(server):
    from deepgram.listen.v1.types import ListenV1Results

    got = await stream(server, speech("Hello world.", 1.5), finalize=False, interim_results="true")
    results = [m for m in got if isinstance(m, ListenV1Results)]
    finals = [r.channel.alternatives[0].transcript for r in results if r.is_final]
    assert len(finals) == 1 and wer("hello world", finals[0]) == 0.0


# ---- /v1/speak


@pytest.fixture
async def tts_server(model_dir, tmp_path):
    async with serving_pocket(model_dir, tmp_path) as (url, _):
        yield url


async def test_sdk_speak_gets_metadata_audio_and_flushed_for_word_by_word_text(tts_server):
    from deepgram.speak.v1.types import SpeakV1Flushed, SpeakV1Metadata, SpeakV1Text

    got: list = []
    async with client_for(tts_server).speak.v1.connect(model="aura-2-thalia-en", encoding="linear16",
                                                       sample_rate="16000") as conn:
        for word in "Hello there, this is a test. ".split(" "):
            await conn.send_text(SpeakV1Text(text=word + " "))
        await conn.send_flush()
        async for message in conn:
            got.append(message)
            if isinstance(message, SpeakV1Flushed):
                break
        await conn.send_close()
    assert isinstance(got[0], SpeakV1Metadata)
    audio = b"".join(m for m in got if isinstance(m, bytes))
    assert len(audio) > 16000 * 2 * 0.2  # at least 0.2 s of 16 kHz 16-bit audio
    assert got[-1].sequence_id == 0
