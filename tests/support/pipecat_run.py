"""Running Pipecat services in a minimal pipeline for the fronts' end-to-end tests:
the services under test, then a collector of every frame that comes out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any


async def run_pipeline(services: Sequence[Any], frames: Sequence[Any], *,
                       feed: Callable[[Any], Awaitable[None]] | None = None,
                       until: Callable[[list[Any]], bool] | None = None, timeout_s: float = 120.0,
                       **params: Any) -> list[Any]:
    """Run ``services`` with ``frames`` queued, then ``feed(worker)`` if given; end the
    pipeline once ``until(collected)`` holds (default: at once, after what was queued)
    and return every frame that came out of the last service, in order."""
    from pipecat.frames.frames import EndFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    collected: list[Any] = []

    class Collector(FrameProcessor):
        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            collected.append(frame)
            await self.push_frame(frame, direction)

    worker = PipelineWorker(Pipeline([*services, Collector()]), params=PipelineParams(**params),
                            enable_rtvi=False)
    runner = WorkerRunner(handle_sigint=False)

    async def drive() -> None:
        await worker.queue_frames(list(frames))
        if feed is not None:
            await feed(worker)
        for _ in range(int(timeout_s / 0.05)):
            if until is None or until(collected):
                break
            await asyncio.sleep(0.05)
        await worker.queue_frame(EndFrame())

    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), drive()), timeout_s)
    return collected
