"""Timing helpers shared by the probes."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import websockets
from websockets.asyncio.client import ClientConnection

CHUNK = 320  # 20 ms at 16 kHz


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()


async def send_realtime(send: Callable[[bytes], Awaitable[None]], audio16k: np.ndarray, speech_end_s: float) -> float:
    """Send 20 ms chunks in real time; the monotonic time the end-of-speech chunk went out."""
    end_chunk = int(speech_end_s * 16000) // CHUNK
    start = time.monotonic()
    sent_at = start
    for i in range(0, len(audio16k), CHUNK):
        await send(pcm16(audio16k[i:i + CHUNK]))
        if i // CHUNK == end_chunk:
            sent_at = time.monotonic()
        delay = start + (i + CHUNK) / 16000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    return sent_at


async def final_latency(ws: ClientConnection, audio16k: np.ndarray, speech_end_s: float,
                        is_final: Callable[[dict[str, Any]], bool], end_message: dict[str, Any]) -> float:
    """Stream ``audio16k`` in real time over ``ws``, then send ``end_message``; the
    seconds from the end-of-speech chunk to the first message ``is_final`` accepts."""
    final_at: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    async def read() -> None:
        async for raw in ws:
            if is_final(json.loads(raw)) and not final_at.done():
                final_at.set_result(time.monotonic())

    reader = asyncio.create_task(read())
    sent_at = await send_realtime(ws.send, audio16k, speech_end_s)
    latency = await asyncio.wait_for(final_at, 30) - sent_at
    await ws.send(json.dumps(end_message))
    await asyncio.wait_for(reader, 30)
    return latency


async def first_audio(ws: ClientConnection, requests: list[dict[str, Any]], cancel: dict[str, Any]) -> float:
    """Send ``requests``; the seconds until the first binary (audio) message, after
    which ``cancel`` goes out."""
    start = time.monotonic()
    for request in requests:
        await ws.send(json.dumps(request))
    while True:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, bytes):
            elapsed = time.monotonic() - start
            break
    await ws.send(json.dumps(cancel))
    return elapsed


def ws_url(base_url: str, path: str) -> str:
    return base_url.replace("http", "ws", 1) + path


async def final_latency_rounds(url: str, audio16k: np.ndarray, speech_end_s: float, rounds: int, *,
                               is_final: Callable[[dict[str, Any]], bool], end_message: dict[str, Any],
                               greeted: bool, headers: dict[str, str] | None = None) -> list[float]:
    """``final_latency`` over a fresh socket to ``url`` per round; ``greeted``: the
    socket's first message (ready, Metadata) is read before the audio."""
    out = []
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None, additional_headers=headers) as ws:
            if greeted:
                await ws.recv()
            out.append(await final_latency(ws, audio16k, speech_end_s, is_final, end_message))
    return out


async def first_audio_rounds(url: str, rounds: int, requests: list[dict[str, Any]],
                             cancel: dict[str, Any]) -> list[float]:
    """``first_audio`` over a fresh socket to ``url`` per round, after its first message
    (ready, Metadata)."""
    out = []
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()
            out.append(await first_audio(ws, requests, cancel))
    return out
