"""OpenAI Realtime's transcription socket, with the same 500 ms end-of-speech window
(server VAD ``silence_duration_ms``) as the native probe. OpenAI's PCM is 24 kHz: the
clip is resampled whole before the run (as if recorded at 24 kHz, so the client adds
no resampler delay), and its 20 ms chunks (480 samples) go out in step with the
native probe's 320-sample ones. The gateway's own 24 -> 16 kHz resampling for the
recognizer (about 1 ms of look-ahead) is part of what this front costs, as it is
for any client that sends 24 kHz to /v1/dictation."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import numpy as np
import websockets

from bench.front_probes.common import CHUNK, pcm16, send_realtime
from gateway.audio import resample

NAME = "openai-realtime"


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription"
    update = {"type": "session.update", "session": {"type": "transcription", "audio": {"input": {
        "format": {"type": "audio/pcm", "rate": 24000}, "transcription": {"model": "gpt-4o-transcribe"},
        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}}}}
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None, additional_headers={"Authorization": "Bearer x"}) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps(update))
            assert json.loads(await ws.recv())["type"] == "session.updated"
            final_at: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            async def read(final_at: asyncio.Future[float] = final_at) -> None:
                async for raw in ws:
                    event = json.loads(raw)
                    if event["type"] == "conversation.item.input_audio_transcription.completed" \
                            and event["transcript"] and not final_at.done():
                        final_at.set_result(time.monotonic())

            audio24k = pcm16(resample(audio16k, 16000, 24000))
            chunks = iter(range(0, len(audio24k), CHUNK * 3))  # 2 bytes a sample, 3/2 the samples

            async def send(_chunk16k: bytes, audio24k: bytes = audio24k, chunks=chunks) -> None:
                at = next(chunks)
                await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                          "audio": base64.b64encode(audio24k[at:at + CHUNK * 3]).decode()}))

            reader = asyncio.create_task(read())
            sent_at = await send_realtime(send, audio16k, speech_end_s)
            out.append(await asyncio.wait_for(final_at, 30) - sent_at)
            reader.cancel()
    return out
