"""The OpenAI Realtime transcription front end to end with the real clients:
the official ``openai`` package's realtime client, Pipecat's
``OpenAIRealtimeSTTService`` in a minimal pipeline and LiveKit's ``openai``
plugin, against a real `voxgate serve` with the real ASR sidecar and tiny.en
transcribing Piper speech. Server VAD and manual commit both."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import pytest

from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence, wer

# Pipecat imports the standard library's audioop, which warns on Python 3.11+, and
# warns about its own deprecated classes when it defines them
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:`AudioContextTTSService` is deprecated:DeprecationWarning")]

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
MAX_WER = 0.25  # tiny.en on Piper: ~10% on average


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url


def speech(text: str, rate: int) -> np.ndarray:
    samples, native = piper_say(text)
    return resample(samples, native, rate)


# ---- the openai package


async def transcribe(url: str, audio24k: np.ndarray, *, turn_detection: dict | None, commit: bool,
                     items: int) -> list:
    """Stream ``audio24k`` in real time (100 ms appends), optionally commit, and collect
    every event up to the ``completed`` of the ``items``-th item."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url + "/v1", api_key="unused-on-loopback")
    events: list = []
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        await conn.session.update(session={"type": "transcription", "audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
            "turn_detection": turn_detection}}})
        pcm = pcm16(audio24k)

        async def send() -> None:
            for i in range(0, len(pcm), 4800):
                await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i:i + 4800]).decode())
                await asyncio.sleep(0.1)
            if commit:
                await conn.input_audio_buffer.commit()

        sender = asyncio.create_task(send())
        async for event in conn:
            events.append(event)
            if len(of_type(events, "conversation.item.input_audio_transcription.completed")) == items:
                break
        await sender
    return events


def of_type(events: list, kind: str) -> list:
    return [e for e in events if e.type == kind]


async def test_openai_client_server_vad_two_sentences(server):
    from openai.types.realtime import (
        ConversationItemInputAudioTranscriptionCompletedEvent,
        InputAudioBufferCommittedEvent,
        SessionCreatedEvent,
    )

    audio = np.concatenate([silence(0.5, 24000), speech(FIRST, 24000), silence(1.2, 24000),
                            speech(SECOND, 24000), silence(1.5, 24000)])
    events = await transcribe(server, audio, turn_detection={"type": "server_vad", "silence_duration_ms": 500},
                              commit=False, items=2)
    assert isinstance(events[0], SessionCreatedEvent) and events[1].type == "session.updated"
    completed = of_type(events, "conversation.item.input_audio_transcription.completed")
    assert all(isinstance(e, ConversationItemInputAudioTranscriptionCompletedEvent) for e in completed)
    assert len(completed) == 2
    assert wer(FIRST, completed[0].transcript) <= MAX_WER and wer(SECOND, completed[1].transcript) <= MAX_WER
    for item in completed:  # each item: started, stopped, committed, deltas adding up to the transcript
        mine = [e for e in events if getattr(e, "item_id", None) == item.item_id]
        assert [e.type for e in mine][:1] == ["input_audio_buffer.speech_started"]
        assert [e.type for e in mine if not e.type.endswith("delta")][1:] == [
            "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
            "conversation.item.input_audio_transcription.completed"]
        assert "".join(e.delta for e in mine if e.type.endswith("delta")) == item.transcript
    committed = of_type(events, "input_audio_buffer.committed")
    assert all(isinstance(e, InputAudioBufferCommittedEvent) for e in committed)
    assert [e.previous_item_id for e in committed] == [None, completed[0].item_id]


async def test_openai_client_manual_commit(server):
    # no trailing silence: only the commit ends the item
    events = await transcribe(server, np.concatenate([silence(0.3, 24000), speech(FIRST, 24000)]),
                              turn_detection=None, commit=True, items=1)
    assert not of_type(events, "input_audio_buffer.speech_started")  # no VAD events without VAD
    (committed,) = of_type(events, "input_audio_buffer.committed")
    (completed,) = of_type(events, "conversation.item.input_audio_transcription.completed")
    assert completed.item_id == committed.item_id and wer(FIRST, completed.transcript) <= MAX_WER
    deltas = of_type(events, "conversation.item.input_audio_transcription.delta")
    assert "".join(d.delta for d in deltas) == completed.transcript


# ---- Pipecat


@pytest.mark.parametrize("server_vad", [True, False], ids=["server-vad", "local-vad-commit"])
async def test_pipecat_openai_realtime_stt_service(server, server_vad):
    from pipecat.frames.frames import (
        ErrorFrame,
        InputAudioRawFrame,
        InterimTranscriptionFrame,
        TranscriptionFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.services.openai.stt import OpenAIRealtimeSTTService

    from tests.support.pipecat_run import run_pipeline

    audio = pcm16(np.concatenate([silence(0.5), speech(FIRST, 16000), silence(1.5)]))
    stt = OpenAIRealtimeSTTService(api_key="unused", base_url=server.replace("http", "ws", 1) + "/v1/realtime",
                                   turn_detection={"type": "server_vad"} if server_vad else False)

    async def feed(worker) -> None:
        await asyncio.sleep(0.5)  # session.created, then Pipecat's session.update
        for i in range(0, len(audio), 640):  # 20 ms frames in real time, as a transport delivers them
            await worker.queue_frame(InputAudioRawFrame(audio=audio[i:i + 640], sample_rate=16000, num_channels=1))
            await asyncio.sleep(0.02)
        if not server_vad:  # Pipecat's own VAD would say this; it commits the buffer
            await worker.queue_frame(VADUserStoppedSpeakingFrame())

    frames = await run_pipeline([stt], [], feed=feed, audio_in_sample_rate=16000,
                                until=lambda got: any(isinstance(f, TranscriptionFrame) for f in got))
    assert not [f for f in frames if isinstance(f, ErrorFrame)]
    (final,) = [f for f in frames if isinstance(f, TranscriptionFrame)]
    assert wer(FIRST, final.text) <= MAX_WER
    interims = [f.text for f in frames if isinstance(f, InterimTranscriptionFrame)]
    assert interims and "".join(interims) == final.text  # Pipecat passes the deltas through


# ---- LiveKit


async def test_livekit_openai_realtime_stt(server):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.utils import http_context
    from livekit.plugins import openai

    audio = pcm16(np.concatenate([silence(0.5, 24000), speech(FIRST, 24000), silence(1.5, 24000)]))
    async with http_context.open():
        recognizer = openai.STT(base_url=server + "/v1", api_key="unused", model="gpt-4o-transcribe",
                                use_realtime=True)
        stream = recognizer.stream()

        async def feed() -> None:
            for i in range(0, len(audio), 960):  # 20 ms at 24 kHz
                chunk = audio[i:i + 960]
                stream.push_frame(rtc.AudioFrame(chunk, 24000, 1, len(chunk) // 2))
                await asyncio.sleep(0.02)

        feeder = asyncio.create_task(feed())
        events = []
        try:
            async for event in stream:
                events.append(event)
                if event.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
                    break
        finally:
            await feeder
            await stream.aclose()
            await recognizer.aclose()
    kinds = [e.type for e in events]
    assert kinds[0] == stt.SpeechEventType.START_OF_SPEECH and stt.SpeechEventType.END_OF_SPEECH in kinds
    assert wer(FIRST, events[-1].alternatives[0].text) <= MAX_WER
