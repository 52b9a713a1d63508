"""The gateway's own sockets, /v1/dictation and /v1/tts: the reference the fronts are measured against."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import websockets

from bench.front_probes.common import send_realtime

NAME = "native"


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/dictation?silence_ms=500&interim=true"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # ready
            final_at: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            async def read(final_at: asyncio.Future[float] = final_at) -> None:
                async for raw in ws:
                    event = json.loads(raw)
                    if event["type"] == "final" and event["text"] and not final_at.done():
                        final_at.set_result(time.monotonic())

            reader = asyncio.create_task(read())
            sent_at = await send_realtime(ws.send, audio16k, speech_end_s)
            out.append(await asyncio.wait_for(final_at, 30) - sent_at)
            await ws.send(json.dumps({"type": "end"}))
            await asyncio.wait_for(reader, 30)
    return out


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/tts"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # ready
            start = time.monotonic()
            await ws.send(json.dumps({"type": "text", "text": text}))
            await ws.send(json.dumps({"type": "flush", "id": "t"}))
            while True:
                message = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(message, bytes):
                    out.append(time.monotonic() - start)
                    break
            await ws.send(json.dumps({"type": "cancel"}))
    return out
