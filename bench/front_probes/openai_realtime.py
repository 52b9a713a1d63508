"""OpenAI Realtime's transcription socket, with the same 500 ms end-of-speech window
(server VAD ``silence_duration_ms``) as the native probe. OpenAI's PCM is 24 kHz: the
16 kHz clip is resampled chunk by chunk as it is sent (off the clock's path: the
chunk that holds the end of speech is timed from when it went out)."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import numpy as np
import websockets

from bench.front_probes.common import pcm16, send_realtime
from gateway.audio import StreamResampler

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

            resampler = StreamResampler(16000, 24000)

            async def send(chunk16k: bytes, resampler: StreamResampler = resampler) -> None:
                samples = np.frombuffer(chunk16k, dtype="<i2").astype(np.float32) / 32768
                await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                          "audio": base64.b64encode(pcm16(resampler.feed(samples))).decode()}))

            reader = asyncio.create_task(read())
            sent_at = await send_realtime(send, audio16k, speech_end_s)
            out.append(await asyncio.wait_for(final_at, 30) - sent_at)
            reader.cancel()
    return out
