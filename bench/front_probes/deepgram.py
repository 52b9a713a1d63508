"""Deepgram's /v1/listen and /v1/speak, with the same end-of-speech window as the native probe."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.front_probes.common import final_latency_rounds, first_audio_rounds, ws_url

NAME = "deepgram"


def is_final(message: dict[str, Any]) -> bool:
    return bool(message["type"] == "Results" and message["is_final"]
                and message["channel"]["alternatives"][0]["transcript"])


async def stt_final_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                            rounds: int) -> list[float]:
    url = ws_url(base_url, "/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000"
                           "&interim_results=true&endpointing=500")
    return await final_latency_rounds(url, audio16k, speech_end_s, rounds, is_final=is_final,
                                      end_message={"type": "CloseStream"}, greeted=False,
                                      headers={"Authorization": "Token x"})


async def tts_first_audio(base_url: str, text: str, *, rounds: int) -> list[float]:
    url = ws_url(base_url, "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=24000")
    return await first_audio_rounds(url, rounds, [{"type": "Speak", "text": text}, {"type": "Flush"}],
                                    {"type": "Clear"})  # after Metadata
