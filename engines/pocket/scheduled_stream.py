"""One utterance handed out by the scheduler: frames cross from its worker thread to an event loop.

The worker hands a step's frames (and at the end an end marker, or the error that
ended the stream) to every stream at once, with one ``loop.call_soon_threadsafe``
per event loop (:func:`hand_over`), not one per frame; the consumer iterates
:meth:`ScheduledStream.frames` on the loop the stream was opened on. The stream
counts the frames waiting for its consumer (``buffered``), which the scheduler reads
to pause it (back-pressure), and wakes the scheduler whenever the consumer takes
one or goes away.

Concurrency contract: ``cancel`` and ``buffered`` may be called from any thread,
``frames()`` on the stream's loop only, ``deliver`` and ``finish`` on the worker
thread only, and so is :func:`hand_over`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import numpy as np

from engines.base import EngineError
from engines.pocket.generation import GenerationSettings
from engines.pocket.voice import VoiceState

log = logging.getLogger(__name__)

_END = object()  # end-of-stream marker on a stream's queue


class StreamOwner(Protocol):
    """What a stream needs of the scheduler that hands it out."""

    high_water: int  # frames buffered at which the scheduler pauses the stream
    decode_chunk: int  # frames of a stream that one Mimi call may decode
    frame_timeout_s: float  # how long the consumer waits for a frame

    def wake(self) -> None:
        """Tell the worker that something changed (a frame was taken, a stream cancelled)."""


class ScheduledStream:
    """One utterance handed out by the scheduler; implements ``engines.base.TtsStream``."""

    def __init__(self, scheduler: StreamOwner, text: str, voice: VoiceState,
                 settings: GenerationSettings | None, seed: int | None, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduler = scheduler
        self.text, self.voice, self.settings, self.seed = text, voice, settings, seed
        self._loop = loop
        # Never overflows: the worker pauses the stream at high_water buffered frames,
        # and a step adds at most a few decodes' worth of frames (a pipelined step collects
        # the helper job running when it began and at most three it starts, each of
        # <= decode_chunk frames a stream) plus the end marker.
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=scheduler.high_water + 4 * scheduler.decode_chunk + 1)
        self._lock = threading.Lock()
        self._buffered = 0
        self.cancelled = False
        self.paused = False
        self.paused_since = 0.0
        self.stream_id: int | None = None  # the batch's id once admitted
        self.finished = False
        self.delivered = 0  # frames handed over (worker thread only)
        self.first_frame_at: float | None = None  # monotonic time of the first frame

    # ---- consumer side (the event loop)
    async def frames(self) -> AsyncIterator[np.ndarray]:
        """Yield float32 frames until the utterance ends or is cancelled.

        A consumer that goes away (its task is cancelled, or it closes this
        iterator early) cancels the stream, so its batch row is freed at once.
        """
        timeout = self._scheduler.frame_timeout_s
        try:
            while not self.cancelled:
                item = await self._next_item(timeout)
                with self._lock:
                    self._buffered -= item is not _END and not isinstance(item, BaseException)
                self._scheduler.wake()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                if not self.cancelled:
                    yield item
        finally:
            if not self.finished:
                self.cancel()

    async def _next_item(self, timeout: float) -> Any:
        # Not asyncio.wait_for: on Python < 3.12 it can swallow the caller's
        # cancellation when the item arrives at the same moment.
        getter = asyncio.ensure_future(self._queue.get())
        try:
            done, _ = await asyncio.wait({getter}, timeout=timeout)
        finally:
            if not getter.done():
                getter.cancel()
        if not done:
            raise EngineError(f"no audio frame within {timeout:g} s; the TTS worker is overloaded",
                              code="engine_timeout")
        return getter.result()

    def cancel(self) -> None:
        """Stop at the next frame boundary; ``frames()`` then ends. Idempotent."""
        self.cancelled = True
        self._scheduler.wake()

    @property
    def buffered(self) -> int:
        with self._lock:
            return self._buffered

    # ---- producer side (the worker thread)
    def deliver(self, item: Any) -> None:
        """Hand one frame, or the error that ends the stream, to the consumer."""
        hand_over([(self, [item], False)])

    def finish(self) -> None:
        """End the stream: ``frames()`` ends after the frames already delivered."""
        hand_over([(self, [], True)])

    def _record(self, items: list[Any]) -> None:
        """Count the frames among ``items`` as buffered; an end marker or error finishes the stream."""
        frames = sum(1 for item in items if item is not _END and not isinstance(item, BaseException))
        if frames:
            with self._lock:
                self._buffered += frames
            self.delivered += frames
            if self.first_frame_at is None:
                self.first_frame_at = time.monotonic()
        if len(items) > frames:
            self.finished = True

    def _put(self, item: Any) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:  # an invariant broke; drop rather than block the loop
            log.error("stream queue overflow; frame dropped")


def hand_over(deliveries: list[tuple[ScheduledStream, list[Any], bool]]) -> None:
    """Give each stream its items (frames, or an error) and, if ``True``, its end marker.

    One ``call_soon_threadsafe`` per event loop for all its streams: each call wakes
    the loop, so one per frame costs the loop and the worker a thread switch per row.
    """
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[ScheduledStream, list[Any]]]] = {}
    for stream, items, end in deliveries:
        items = [*items, _END] if end else items
        if not items:
            continue
        stream._record(items)
        by_loop.setdefault(stream._loop, []).append((stream, items))
    for loop, batch in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, batch)
        except RuntimeError:  # the loop is closed: nobody will read these streams again
            for stream, _ in batch:
                stream.cancelled = True


def _put_all(batch: list[tuple[ScheduledStream, list[Any]]]) -> None:
    for stream, items in batch:
        for item in items:
            stream._put(item)

