"""Timing helpers shared by the probes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import numpy as np

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
