"""Deepgram's /v1/listen and /v1/speak, with the same end-of-speech window as the native probe."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import websockets

from bench.front_probes.common import send_realtime

NAME = "deepgram"


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    out = []
    url = (base_url.replace("http", "ws", 1) + "/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000"
           "&interim_results=true&endpointing=500")
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None, additional_headers={"Authorization": "Token x"}) as ws:
            final_at: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            async def read(final_at: asyncio.Future[float] = final_at) -> None:
                async for raw in ws:
                    message = json.loads(raw)
                    if message["type"] == "Results" and message["is_final"] and not final_at.done() \
                            and message["channel"]["alternatives"][0]["transcript"]:
                        final_at.set_result(time.monotonic())

            reader = asyncio.create_task(read())
            sent_at = await send_realtime(ws.send, audio16k, speech_end_s)
            out.append(await asyncio.wait_for(final_at, 30) - sent_at)
            await ws.send(json.dumps({"type": "CloseStream"}))
            await asyncio.wait_for(reader, 30)
    return out


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=24000"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # Metadata
            start = time.monotonic()
            await ws.send(json.dumps({"type": "Speak", "text": text}))
            await ws.send(json.dumps({"type": "Flush"}))
            while True:
                message = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(message, bytes):
                    out.append(time.monotonic() - start)
                    break
            await ws.send(json.dumps({"type": "Clear"}))
    return out
