"""The gateway's own sockets, /v1/dictation and /v1/tts: the reference the fronts are measured against."""

from __future__ import annotations

from typing import Any

import numpy as np
import websockets

from bench.front_probes.common import final_latency, first_audio

NAME = "native"


def is_final(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "final" and event["text"])


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/dictation?silence_ms=500&interim=true"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # ready
            out.append(await final_latency(ws, audio16k, speech_end_s, is_final, {"type": "end"}))
    return out


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/tts"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # ready
            out.append(await first_audio(ws, [{"type": "text", "text": text}, {"type": "flush", "id": "t"}],
                                         {"type": "cancel"}))
    return out
