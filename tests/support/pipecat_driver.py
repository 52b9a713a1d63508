"""Pipecat services run in a real, minimal pipeline, for the fronts' tests and benchmark.

A pipeline needs no transport: audio goes in as ``InputAudioRawFrame``s queued on
the worker in real time (20 ms each), through Pipecat's own ``VADProcessor`` with
Silero (so the STT service gets the ``VADUserStoppedSpeakingFrame`` it reacts to,
as in a bot), into the service under test; a collector at the end records every
frame with the monotonic time it arrived. Pipecat is imported only when this
module is (callers ``importorskip`` it first); its own import-time deprecation
warnings are not ours to fix.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # audioop, pipecat's own deprecated classes
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.audio.vad.vad_analyzer import VADParams
    from pipecat.frames.frames import EndFrame, Frame, InputAudioRawFrame, MetricsFrame, TranscriptionFrame
    from pipecat.metrics.metrics import TTFBMetricsData
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.task import PipelineParams
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.processors.audio.vad_processor import VADProcessor
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

RATE = 16000
CHUNK_BYTES = 640  # 20 ms of 16-bit mono at 16 kHz
STOP_SECS = VADParams().stop_secs  # Pipecat's default: what a bot gets without tuning


@dataclass
class Heard:
    """What reached the end of the pipeline, each frame with its arrival (monotonic seconds)."""

    frames: list[tuple[float, Frame]] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)  # when each audio chunk was queued

    def of(self, kind: type) -> list[Any]:
        return [f for _, f in self.frames if isinstance(f, kind)]

    def finals(self) -> list[TranscriptionFrame]:
        return self.of(TranscriptionFrame)

    def ttfb(self, processor: str) -> list[float]:
        """The TTFB values ``processor`` reported, without the zero every service reports at start."""
        return [d.value for m in self.of(MetricsFrame) for d in m.data
                if isinstance(d, TTFBMetricsData) and d.processor == processor and d.value > 0]


class Collector(FrameProcessor):
    def __init__(self, heard: Heard, wake: Callable[[Frame], None]) -> None:
        super().__init__()
        self._heard = heard
        self._wake = wake

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self._heard.frames.append((time.monotonic(), frame))
        self._wake(frame)
        await self.push_frame(frame, direction)


class Run:
    """One pipeline ``[*processors, collector]`` on a ``WorkerRunner``, as an async context.

    ``await run.wait_for(predicate)`` waits (with a timeout) until a collected frame
    satisfies it; leaving the context sends ``EndFrame`` and waits for the pipeline to end.
    """

    def __init__(self, *processors: FrameProcessor, timeout_s: float = 60.0) -> None:
        self.heard = Heard()
        self._timeout_s = timeout_s
        self._changed = asyncio.Event()
        self._started = asyncio.Event()
        self.worker = PipelineWorker(Pipeline([*processors, Collector(self.heard, self._wake)]),
                                     params=PipelineParams(enable_metrics=True, audio_in_sample_rate=RATE),
                                     idle_timeout_secs=None)
        self._runner = WorkerRunner(handle_sigint=False)
        self._task: asyncio.Task[None] | None = None

        @self.worker.event_handler("on_pipeline_started")
        async def started(_worker: Any, _frame: Frame) -> None:
            self._started.set()

    def _wake(self, _frame: Frame) -> None:
        self._changed.set()

    async def __aenter__(self) -> Run:
        await self._runner.add_workers(self.worker)
        self._task = asyncio.create_task(self._runner.run())
        started = asyncio.create_task(self._started.wait())
        done, _ = await asyncio.wait({started, self._task}, timeout=self._timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        if started not in done:
            started.cancel()
            await self._stop()
            raise RuntimeError("the Pipecat pipeline did not start")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        assert self._task is not None
        if not self._task.done():
            await self.worker.queue_frame(EndFrame())
        await asyncio.wait_for(self._task, self._timeout_s)

    async def wait_for(self, predicate: Callable[[Heard], bool], timeout_s: float = 30.0) -> None:
        async def wait() -> None:
            while not predicate(self.heard):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), timeout_s)

    async def send_audio(self, pcm: bytes) -> None:
        """Queue ``pcm`` (16-bit mono, 16 kHz) in 20 ms frames at real-time pace."""
        start = time.monotonic()
        for i in range(0, len(pcm), CHUNK_BYTES):
            await self.worker.queue_frame(InputAudioRawFrame(audio=pcm[i:i + CHUNK_BYTES], sample_rate=RATE,
                                                             num_channels=1))
            self.heard.sent_at.append(time.monotonic())
            delay = start + (i + CHUNK_BYTES) / (2 * RATE) - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


def vad() -> VADProcessor:
    """Pipecat's VAD stage as a bot has it: Silero with its default parameters."""
    return VADProcessor(vad_analyzer=SileroVADAnalyzer(sample_rate=RATE))
