"""Deepgram's /v1/listen and /v1/speak, with the same end-of-speech window as the native probe."""

from __future__ import annotations

from typing import Any

import numpy as np
import websockets

from bench.front_probes.common import final_latency, first_audio

NAME = "deepgram"


def is_final(message: dict[str, Any]) -> bool:
    return bool(message["type"] == "Results" and message["is_final"]
                and message["channel"]["alternatives"][0]["transcript"])


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    out = []
    url = (base_url.replace("http", "ws", 1) + "/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000"
           "&interim_results=true&endpointing=500")
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None, additional_headers={"Authorization": "Token x"}) as ws:
            out.append(await final_latency(ws, audio16k, speech_end_s, is_final, {"type": "CloseStream"}))
    return out


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    out = []
    url = base_url.replace("http", "ws", 1) + "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=24000"
    for _ in range(rounds):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.recv()  # Metadata
            out.append(await first_audio(ws, [{"type": "Speak", "text": text}, {"type": "Flush"}], {"type": "Clear"}))
    return out
