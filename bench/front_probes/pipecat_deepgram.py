"""Pipecat's ``DeepgramSTTService`` pointed at /v1/listen, measured the way Pipecat measures it.

The service runs in a minimal pipeline behind Pipecat's own Silero VAD with its
default parameters (tests/support/pipecat_driver.py), as in a bot: at the VAD's
stop the service sends ``Finalize``, and the ``Results`` with ``from_finalize: true``
is the finalized transcript. Pipecat's STT latency metric is its TTFB
(``STTService._handle_vad_user_stopped_speaking``): from the VAD stop's timestamp
minus ``stop_secs`` (the speech end as its VAD saw it) to that finalized
``TranscriptionFrame``. Each round also gives our own clock's reading of the same
run: the end-of-speech chunk queued -> the final at the end of the pipeline.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from loguru import logger

from bench.front_probes.common import CHUNK, pcm16

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # Pipecat's own, at import
    from pipecat.frames.frames import TranscriptionFrame
    from pipecat.services.deepgram.stt import DeepgramSTTService

    from tests.support.pipecat_driver import STOP_SECS, Run, vad

NAME = "pipecat DeepgramSTTService"
METRIC = f"Pipecat's STT TTFB: VAD stop - stop_secs ({STOP_SECS * 1000:.0f} ms) -> finalized transcript"

logger.remove()
logger.add(sys.stderr, level="WARNING")


async def framework_stt_latency(base_url: str, audio16k: np.ndarray, *, speech_end_s: float,
                                rounds: int) -> list[tuple[float, float]]:
    out = []
    end_chunk = int(speech_end_s * 16000) // CHUNK
    for _ in range(rounds):
        stt = DeepgramSTTService(api_key="unused-on-loopback", base_url=base_url.replace("http", "ws", 1))
        async with Run(vad(), stt) as run:
            await run.send_audio(pcm16(audio16k))
            await run.wait_for(lambda heard, stt=stt: bool(heard.ttfb(stt.name)) and bool(heard.finals()))
        heard = run.heard
        final_at = next(at for at, frame in heard.frames if isinstance(frame, TranscriptionFrame))
        out.append((heard.ttfb(stt.name)[0], final_at - heard.sent_at[end_chunk]))
    return out
