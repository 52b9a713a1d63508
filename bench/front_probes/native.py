"""The gateway's own sockets, /v1/dictation and /v1/tts: the reference the fronts are measured against."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.front_probes.common import final_latency_rounds, first_audio_rounds, ws_url

NAME = "native"


def is_final(event: dict[str, Any]) -> bool:
    return bool(event["type"] == "final" and event["text"])


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    url = ws_url(base_url, "/v1/dictation?silence_ms=500&interim=true")
    return await final_latency_rounds(url, audio16k, speech_end_s, rounds, is_final=is_final,
                                      end_message={"type": "end"}, greeted=True)  # ready


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    return await first_audio_rounds(ws_url(base_url, "/v1/tts"), rounds,
                                    [{"type": "text", "text": text}, {"type": "flush", "id": "t"}], {"type": "cancel"})
