"""ElevenLabs' stream-input socket: the text and its flush in one message, 24 kHz
PCM out (the engine's own rate, as the native probe gets). The stream is opened
(its first message sent) before the clock starts, as the native socket is ready
before it."""

from __future__ import annotations

import asyncio
import json
import time

import websockets

NAME = "elevenlabs"


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/text-to-speech/alba/stream-input?output_format=pcm_24000"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None, additional_headers={"xi-api-key": "x"}) as ws:
            await ws.send(json.dumps({"text": " "}))
            await asyncio.sleep(0.05)  # the stream's session is up before the clock starts
            start = time.monotonic()
            await ws.send(json.dumps({"text": text + " ", "flush": True}))
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if message.get("audio"):
                    out.append(time.monotonic() - start)
                    break
    return out
