"""Deepgram Flux TTS (/v2/speak) end to end with the real clients pointed at a
real `voxgate serve` (Piper, the ASR sidecar with tiny.en): deepgram-sdk's
``speak.v2`` socket, Pipecat's ``DeepgramFluxTTSService`` and LiveKit's
``TTSv2``. What they got is transcribed back; an interrupt's ``text_spoken``
is checked against what the ASR hears in the audio played."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from tests.e2e.deepgram_agents_support import (
    KEY,
    MAX_WORD_ERRORS,
    gateway_server,  # noqa: F401  (the `server` fixture)
    transcribe,
    word_errors,
)
from tests.support.speech import heard_prefix

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:websockets.*deprecated:DeprecationWarning")]
pytest.importorskip("deepgram", reason="deepgram-sdk is not installed (pip install 'voxgate[test]')")

RATE = 24000
ANSWER = "Hello there, this is a test. And here is a second sentence."
LONG = ("The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background. "
        "It's easy to tell the depth of a well. These days a chicken leg is a rare dish.")
NO_CONTROLS = {"pronunciations_applied": 0, "breaks_applied": 0, "pronunciation_warnings": 0}


def ms_of(pcm: bytes) -> float:
    return len(pcm) / 2 / RATE * 1000


def sdk_client(url: str):
    from deepgram import AsyncDeepgramClient, DeepgramClientEnvironment

    ws = url.replace("http://", "ws://")
    env = DeepgramClientEnvironment(base=url, production=ws, agent=ws, agent_rest=url)
    return AsyncDeepgramClient(api_key=KEY, environment=env)


async def sdk_turn(conn, text: str) -> tuple[bytes, list]:
    """Speak ``text`` word by word, Flush; the audio and the SDK's messages up to Flushed."""
    from deepgram.speak.v2.types import SpeakV2Flush, SpeakV2Flushed, SpeakV2Speak

    for word in text.split(" "):
        await conn.send_speak(SpeakV2Speak(text=word + " "))
    await conn.send_flush(SpeakV2Flush())
    audio, messages = b"", []
    while True:
        message = await asyncio.wait_for(conn.recv(), 60)
        if isinstance(message, bytes):
            audio += message
            continue
        messages.append(message)
        if isinstance(message, SpeakV2Flushed):
            return audio, messages


async def test_sdk_speak_v2_turns_interrupt_with_the_text_heard_and_close(server):
    from deepgram.speak.v2.types import (
        SpeakV2Close,
        SpeakV2Connected,
        SpeakV2Interrupt,
        SpeakV2InterruptPlaybackOffset,
        SpeakV2SessionMetadata,
        SpeakV2Speak,
        SpeakV2SpeechInterrupted,
        SpeakV2SpeechMetadata,
        SpeakV2SpeechStarted,
    )

    async with sdk_client(server).speak.v2.connect(model="flux-alexis-en", encoding="linear16",
                                                   sample_rate="24000") as conn:
        connected = await asyncio.wait_for(conn.recv(), 30)
        assert isinstance(connected, SpeakV2Connected)
        assert connected.model_name == "piper-en_US-joe-medium" and len(connected.model_uuids) == 1
        audio, messages = await sdk_turn(conn, ANSWER)
        started, metadata, flushed = messages
        assert isinstance(started, SpeakV2SpeechStarted) and isinstance(metadata, SpeakV2SpeechMetadata)
        assert metadata.speech_id == flushed.speech_id == started.speech_id
        assert metadata.audio_duration_ms == round(ms_of(audio))
        assert metadata.input_character_count == len(ANSWER) + 1  # each word went with a space after it
        assert metadata.controls_applied.dict() == NO_CONTROLS
        assert word_errors(ANSWER, await transcribe(server, audio, RATE)) <= MAX_WORD_ERRORS

        # a long turn, interrupted once 3 s of it were played
        for word in LONG.split(" "):
            await conn.send_speak(SpeakV2Speak(text=word + " "))
        second = b""
        while ms_of(second) < 3000:
            message = await asyncio.wait_for(conn.recv(), 60)
            second += message if isinstance(message, bytes) else b""
        played_ms = metadata.audio_duration_ms + 3000
        await conn.send_interrupt(SpeakV2Interrupt(playback_offset=SpeakV2InterruptPlaybackOffset(value=played_ms)))
        while not isinstance(message := await asyncio.wait_for(conn.recv(), 60), SpeakV2SpeechInterrupted):
            pass
        assert message.audio_played_ms == played_ms
        assert message.text_spoken + message.text_remaining == LONG + " "
        assert message.text_spoken and message.text_remaining.startswith(" ")  # cut between words
        assert message.metadata.input_character_count == len(LONG) + 1
        heard = await transcribe(server, second[:3000 * RATE // 1000 * 2], RATE)
        # the words in the audio played are the words of text_spoken, give or take the one cut off
        assert abs(heard_prefix(LONG, heard) - len(message.text_spoken.split())) <= 1, (heard, message.text_spoken)

        await conn.send_close(SpeakV2Close())
        while not isinstance(message := await asyncio.wait_for(conn.recv(), 60), SpeakV2SessionMetadata):
            pass
        assert message.total_audio_duration_ms == played_ms  # rebased on the audio played
        assert message.total_input_character_count == len(ANSWER) + len(LONG) + 2


@pytest.fixture
async def http():
    import aiohttp

    async with aiohttp.ClientSession() as session:
        yield session


async def test_livekit_tts_v2_streams_reuse_the_socket(server, http):
    deepgram = pytest.importorskip("livekit.plugins.deepgram", reason="livekit-plugins-deepgram is not installed")
    texts = ("Hello there, this is a test.", "And here is a second answer.")
    tts = deepgram.TTSv2(api_key=KEY, base_url=server + "/v2/speak", http_session=http, sample_rate=RATE)
    got = []
    for text in texts:
        stream = tts.stream()
        for word in text.split():
            stream.push_text(word + " ")
        stream.end_input()
        got.append(([e async for e in stream], stream._connection_reused))
        await stream.aclose()
    await tts.aclose()
    assert [reused for _, reused in got] == [False, True]
    for text, (events, _) in zip(texts, got, strict=True):
        assert {(e.frame.sample_rate, e.frame.num_channels) for e in events} == {(RATE, 1)}
        assert events[-1].is_final and len({e.segment_id for e in events}) == 1
        pcm = b"".join(e.frame.data.tobytes() for e in events)
        assert word_errors(text, await transcribe(server, pcm, RATE)) <= MAX_WORD_ERRORS


async def test_pipecat_flux_tts_speaks_is_interrupted_and_speaks_the_next_answer(server):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pytest.importorskip("pipecat", reason="pipecat-ai is not installed")
        from pipecat.frames.frames import (
            ErrorFrame,
            InterruptionFrame,
            TTSAudioRawFrame,
            TTSSpeakFrame,
            TTSStartedFrame,
            TTSStoppedFrame,
        )
        from pipecat.services.deepgram.flux.tts import DeepgramFluxTTSService

        from tests.support.pipecat_driver import Heard, Run

    def audio_of(heard: Heard, context_id: str | None = None) -> bytes:
        return b"".join(f.audio for f in heard.of(TTSAudioRawFrame) if context_id in (None, f.context_id))

    tts = DeepgramFluxTTSService(api_key=KEY, url=server.replace("http://", "ws://") + "/v2/speak",
                                 sample_rate=RATE)
    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame(ANSWER))
        await run.wait_for(lambda heard: bool(heard.of(TTSStoppedFrame)))
        first = run.heard.of(TTSStartedFrame)[0].context_id
        await run.worker.queue_frame(TTSSpeakFrame(LONG))
        await run.wait_for(lambda heard: len(heard.of(TTSStartedFrame)) == 2 and any(
            f.context_id == heard.of(TTSStartedFrame)[1].context_id for f in heard.of(TTSAudioRawFrame)))
        await run.worker.queue_frame(InterruptionFrame())
        await run.worker.queue_frame(TTSSpeakFrame("And this is the next answer."))

        def third_stopped(heard: Heard) -> bool:
            started = heard.of(TTSStartedFrame)
            return len(started) == 3 and any(f.context_id == started[2].context_id for f in heard.of(TTSStoppedFrame))

        await run.wait_for(third_stopped)
    assert not run.heard.of(ErrorFrame)
    assert {(f.sample_rate, f.num_channels) for f in run.heard.of(TTSAudioRawFrame)} == {(RATE, 1)}
    assert word_errors(ANSWER, await transcribe(server, audio_of(run.heard, first), RATE)) <= MAX_WORD_ERRORS
    third = run.heard.of(TTSStartedFrame)[2].context_id
    heard = (await transcribe(server, audio_of(run.heard, third), RATE)).split()
    assert word_errors("And this is the next answer.", " ".join(heard[-6:])) <= 1, heard
