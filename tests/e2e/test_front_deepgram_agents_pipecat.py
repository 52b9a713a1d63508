"""Pipecat's Deepgram services against the Deepgram front of a real `voxgate serve`
(the ASR sidecar with tiny.en, Piper), each in a minimal Pipecat pipeline:
``DeepgramSTTService(base_url=...)`` behind Pipecat's Silero VAD hears Piper speech,
``DeepgramTTSService(base_url=...)`` speaks, and what it got is transcribed back."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from tests.e2e.deepgram_agents_support import (
    FIRST,
    IDLE_TIMEOUT_S,
    KEY,
    MAX_WORD_ERRORS,
    SECOND,
    gateway_server,  # noqa: F401  (the `server` fixture)
    piper_seconds,
    speech,
    transcribe,
    word_errors,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              # deepgram-sdk imports websockets' legacy client API, which warns on import
              pytest.mark.filterwarnings("ignore:websockets.*deprecated:DeprecationWarning")]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # Pipecat's own, at import
    pytest.importorskip("pipecat", reason="pipecat-ai is not installed (pip install 'voxgate[test]' on Python >= 3.11)")
    from pipecat.frames.frames import (
        ErrorFrame,
        InterimTranscriptionFrame,
        InterruptionFrame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
    )
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.deepgram.tts import DeepgramTTSService

    from tests.support.pipecat_driver import Heard, Run, vad

RATE = 24000
LONG = "This is a long answer that goes on. " * 20


def ws(server: str) -> str:
    return server.replace("http://", "ws://")


async def test_stt_service_finals_come_from_finalize_at_each_vad_stop(server):
    # the server's own silence rule held off (5 s), so each utterance ends by the Finalize of Pipecat's VAD
    # stop however late a loaded machine runs that VAD (with the 500 ms default the rule could come first)
    stt = DeepgramSTTService(api_key=KEY, base_url=ws(server), settings=DeepgramSTTService.Settings(endpointing=5000))
    async with Run(vad(), stt) as run:
        await run.send_audio(speech(FIRST, SECOND))
        await run.wait_for(lambda heard: len(heard.finals()) >= 2)
    finals = run.heard.finals()
    assert len(finals) == 2, [f.text for f in finals]
    for want, got in zip([FIRST, SECOND], finals, strict=True):
        assert word_errors(want, got.text) <= MAX_WORD_ERRORS, got.text
    # finalized: Pipecat saw `from_finalize: true` on the Results its Finalize (sent at VAD stop) asked for
    assert [f.finalized for f in finals] == [True, True]
    assert run.heard.of(InterimTranscriptionFrame), "Pipecat asks for interim_results and shows them"
    assert not run.heard.of(ErrorFrame)
    # Pipecat's STT latency metric (speech end by its VAD -> finalized transcript), reported once per turn
    assert len(run.heard.ttfb(stt.name)) == 2


def audio_of(heard: Heard, context_id: str | None = None) -> bytes:
    return b"".join(f.audio for f in heard.of(TTSAudioRawFrame) if context_id in (None, f.context_id))


async def test_tts_service_speaks_the_text_and_stops_at_flushed(server):
    text = "Hello there, this is a test. And here is a second sentence."
    tts = DeepgramTTSService(api_key=KEY, base_url=ws(server), sample_rate=RATE)
    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame(text))
        await run.wait_for(lambda heard: bool(heard.of(TTSStoppedFrame)))
    kinds = [type(f) for _, f in run.heard.frames if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))]
    assert kinds[0] is TTSStartedFrame and kinds[-1] is TTSStoppedFrame and kinds.count(TTSStoppedFrame) == 1
    assert {(f.sample_rate, f.num_channels) for f in run.heard.of(TTSAudioRawFrame)} == {(RATE, 1)}
    assert word_errors(text, await transcribe(server, audio_of(run.heard), RATE)) <= MAX_WORD_ERRORS
    assert len(run.heard.ttfb(tts.name)) == 1
    assert not run.heard.of(ErrorFrame)


async def test_tts_service_stops_at_an_interruption_and_speaks_the_next_answer(server):
    """Barge-in: Pipecat sends Clear; synthesis of the long answer stops and the same socket speaks the next one."""
    text = "And this is the next answer."
    tts = DeepgramTTSService(api_key=KEY, base_url=ws(server), sample_rate=RATE)
    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame(LONG))
        await run.wait_for(lambda heard: bool(heard.of(TTSAudioRawFrame)))
        await run.worker.queue_frame(InterruptionFrame())
        await run.worker.queue_frame(TTSSpeakFrame(text))

        def next_answer_stopped(heard: Heard) -> bool:
            started = heard.of(TTSStartedFrame)
            return len(started) == 2 and any(f.context_id == started[1].context_id for f in heard.of(TTSStoppedFrame))

        await run.wait_for(next_answer_stopped)
    first, second = (f.context_id for f in run.heard.of(TTSStartedFrame))
    # the long answer stopped: far less of it came than it takes to say
    assert len(audio_of(run.heard)) / (2 * RATE) < piper_seconds(LONG) / 2
    # Pipecat files audio under the context active when it arrives, so a frame already on its way when
    # Clear went out may land at the head of the next answer's: the next answer is the tail of what it got
    heard = (await transcribe(server, audio_of(run.heard, second), RATE)).split()
    assert word_errors(text, " ".join(heard[-len(text.split()):])) <= 1, heard
    assert first != second and not run.heard.of(ErrorFrame)


async def test_tts_service_keeps_its_socket_through_a_pause_longer_than_the_idle_timeout(server):
    """Pipecat holds /v1/speak open between answers and sends nothing meanwhile, as Deepgram allows."""
    tts = DeepgramTTSService(api_key=KEY, base_url=ws(server), sample_rate=RATE)
    connects: list[object] = []

    @tts.event_handler("on_connected")
    async def connected(_service: object) -> None:
        connects.append(_service)

    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame("First answer."))
        await run.wait_for(lambda heard: len(heard.of(TTSStoppedFrame)) == 1)
        await asyncio.sleep(2.5 * IDLE_TIMEOUT_S)
        await run.worker.queue_frame(TTSSpeakFrame("Second answer after a pause."))
        await run.wait_for(lambda heard: len(heard.of(TTSStoppedFrame)) == 2)
    second = run.heard.of(TTSStartedFrame)[1].context_id
    assert len(connects) == 1  # no reconnect
    heard = await transcribe(server, audio_of(run.heard, second), RATE)
    assert word_errors("Second answer after a pause.", heard) <= 1
