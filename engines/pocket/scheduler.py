"""One worker thread that owns the Pocket model and steps every stream together.

Every iteration the worker (1) admits waiting streams into the batch (their text
prompt runs then), (2) drops cancelled ones, (3) runs queued exclusive jobs (voice
cloning), then (4) takes the next frame of every active, unpaused stream in ONE
batched forward and hands each frame to its stream on the asyncio loop with
``loop.call_soon_threadsafe``.

Back-pressure: a stream whose consumer has ``high_water`` frames waiting is
paused (its row is left out of the step) until the consumer has read down to
``low_water``; a stalled consumer therefore costs nothing and never holds the
others back. A stream paused for longer than ``stall_timeout_s`` is dropped.

Chunked decoding (``decode_chunk`` K > 1, default 4): Mimi decodes several frames
of a stream per call, which costs less per frame. Pipelined, the batch's Mimi
thread takes the latents queued (up to K a stream, ramping up from one frame per
call), and with few queued it waits for a full call's worth unless a stream is short
of audio (below). Sequential, a stream's first frame is decoded at once; after that
its latents wait and are decoded K per Mimi call, unless its listener is short of
audio: a stream whose lead -- audio delivered minus wall time since its first
frame, i.e. what a listener who started playing at the first frame still has
buffered -- is below ``lead_s`` is decoded every step. Either way frames are handed
over one at a time and the audio is the same as with K = 1.

Concurrency contract: ``submit``, ``run_exclusive``, ``close`` and the
``ScheduledStream`` methods may be called from any thread (``frames()`` from the
loop the stream was opened on). Everything touching the model or the batch runs
on the worker thread only.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from engines.base import EngineError, EngineUnavailable
from engines.pocket.batch import StepOutput, StreamBatch
from engines.pocket.generation import GenerationSettings
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel

log = logging.getLogger(__name__)

_END = object()  # end-of-stream marker on a stream's queue


class PausableBatch(StreamBatch):
    """A StreamBatch that can leave some rows out of a step.

    Rows stay packed: before a step the paused rows are swapped to the tail (through
    one spare row), the active prefix is stepped, and the paused rows are moved down
    behind the rows that survived the step.
    """

    def __init__(self, model: PocketModel, max_streams: int, pipelined: bool = False, decode_chunk: int = 1) -> None:
        # + the spare row used for swaps
        super().__init__(model, max_streams + 1, pipelined=pipelined, decode_chunk=decode_chunk)
        self.max_streams = max_streams  # admission limit; row max_streams is the spare
        self._spare = max_streams

    def _swap(self, i: int, j: int) -> None:
        self._settle()
        for state in (self._lm, self._mimi):
            state.copy_row(i, self._spare)
            state.copy_row(j, i)
            state.copy_row(self._spare, j)
        self._rows[i], self._rows[j] = self._rows[j], self._rows[i]

    @torch.no_grad()
    def step_active(self, paused: set[int], hurry: set[int] | None = None) -> list[StepOutput]:
        """Step every stream not in ``paused`` (stream ids) by one frame; ``hurry`` as in ``step``."""
        hurry = hurry or set()
        if not paused:
            return self.step(hurry)
        active = 0
        for i in range(len(self._rows)):
            if self._rows[i].stream_id not in paused:
                if i != active:
                    self._swap(i, active)
                active += 1
        if active == 0:
            return []
        tail = self._rows[active:]
        self._rows = self._rows[:active]
        try:
            return self.step(hurry)
        finally:
            head = len(self._rows)
            for j in range(len(tail)):
                if head + j != active + j:
                    self._settle()
                    self._lm.copy_row(active + j, head + j)
                    self._mimi.copy_row(active + j, head + j)
            self._rows = self._rows + tail


class ScheduledStream:
    """One utterance handed out by the scheduler; implements ``engines.base.TtsStream``."""

    def __init__(self, scheduler: BatchScheduler, text: str, voice: VoiceState,
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
        if item is not _END and not isinstance(item, BaseException):
            with self._lock:
                self._buffered += 1
            self.delivered += 1
            if self.first_frame_at is None:
                self.first_frame_at = time.monotonic()
        else:
            self.finished = True
        try:
            self._loop.call_soon_threadsafe(self._put, item)
        except RuntimeError:  # the loop is closed: nobody will read this stream again
            self.cancelled = True

    def _put(self, item: Any) -> None:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:  # an invariant broke; drop rather than block the loop
            log.error("stream queue overflow; frame dropped")


class BatchScheduler:
    """Owns the model on one worker thread; see the module docstring."""

    def __init__(self, model: PocketModel, *, max_streams: int = 8, max_waiting: int = 32, threads: int = 0,
                 pipelined: bool | None = None, high_water: int = 8, low_water: int = 4,
                 stall_timeout_s: float = 60.0, frame_timeout_s: float = 60.0, idle_wait_s: float = 0.5,
                 decode_chunk: int = 4, lead_s: float | None = None) -> None:
        if not 0 <= low_water < high_water:
            raise ValueError("low_water: must be below high_water")
        if decode_chunk < 1:
            raise ValueError("decode_chunk: must be at least 1")
        self.decode_chunk = decode_chunk
        self.frame_s = model.frame_samples / model.sample_rate
        # Default: chunk only while a whole chunk's worth of audio is buffered ahead.
        self.lead_s = decode_chunk * self.frame_s if lead_s is None else lead_s
        self.model = model
        self.max_streams, self.max_waiting = max_streams, max_waiting
        cores = threads or os.cpu_count() or 1
        # Pipelined (default with 2+ cores): Mimi decodes frame t on the batch's helper
        # thread while the LM computes t + 1. Both threads run torch ops, so each gets
        # half the cores; more intra-op threads than cores stalls every op.
        self.pipelined = cores >= 2 if pipelined is None else pipelined
        self.threads = max(1, cores // 2) if self.pipelined else cores
        self.high_water, self.low_water = high_water, low_water
        self.stall_timeout_s, self.frame_timeout_s, self.idle_wait_s = stall_timeout_s, frame_timeout_s, idle_wait_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._waiting: collections.deque[ScheduledStream] = collections.deque()
        self._jobs: collections.deque[tuple[Callable[[], Any], concurrent.futures.Future]] = collections.deque()
        self._active: dict[int, ScheduledStream] = {}
        self._closing = False
        self._thread: threading.Thread | None = None
        self.steps = 0  # batched forwards run (for tests and benchmarks)
        self.rows_stepped = 0

    # ---- any thread
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pocket-scheduler", daemon=True)
            self._thread.start()

    def submit(self, text: str, voice: VoiceState, settings: GenerationSettings | None = None,
               seed: int | None = None, loop: asyncio.AbstractEventLoop | None = None) -> ScheduledStream:
        """Queue an utterance; frames come from the returned stream's ``frames()``.

        Raises EngineUnavailable when closed and EngineError(over_capacity) when
        ``max_streams`` are running and ``max_waiting`` more are waiting.
        """
        stream = ScheduledStream(self, text, voice, settings, seed, loop or asyncio.get_running_loop())
        with self._lock:
            if self._closing or self._thread is None:
                raise EngineUnavailable("the Pocket TTS worker is not running")
            if len(self._waiting) >= self.max_waiting:
                raise EngineError(f"too many TTS streams: {self.max_streams} running and {self.max_waiting} "
                                  "waiting; try again shortly", code="over_capacity")
            self._waiting.append(stream)
        self.wake()
        return stream

    def run_exclusive(self, job: Callable[[], Any]) -> concurrent.futures.Future:
        """Run ``job`` on the worker thread between two steps; returns its future."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closing or self._thread is None:
                raise EngineUnavailable("the Pocket TTS worker is not running")
            self._jobs.append((job, future))
        self.wake()
        return future

    def wake(self) -> None:
        self._wake.set()

    def load(self) -> tuple[int, int]:
        """(running, waiting) stream counts."""
        with self._lock:
            return len(self._active), len(self._waiting)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the worker; open streams end with EngineUnavailable. Idempotent."""
        with self._lock:
            self._closing = True
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("Pocket scheduler did not stop within %.0f s", timeout_s)

    # ---- worker thread
    def _run(self) -> None:
        torch.set_num_threads(self.threads)
        batch = PausableBatch(self.model, self.max_streams, self.pipelined, self.decode_chunk)
        try:
            while True:
                self._wake.clear()  # before looking at the state: a later wake() is never lost
                with self._lock:
                    if self._closing:
                        break
                self._run_jobs()
                self._drop_cancelled(batch)
                self._admit(batch)
                paused = self._update_pauses()
                if len(batch) - len(paused) <= 0:
                    self._wake.wait(self.idle_wait_s)
                    continue
                try:
                    outputs = batch.step_active(paused, self._hurried(paused))
                except Exception as exc:  # a bug in a step: fail these streams, keep the worker alive
                    log.exception("Pocket batch step failed")
                    self._fail_all(EngineError(f"synthesis failed: {exc}"))
                    batch.close()
                    batch = PausableBatch(self.model, self.max_streams, self.pipelined, self.decode_chunk)
                    continue
                self.steps += 1
                self.rows_stepped += len(outputs)
                for out in outputs:
                    stream = self._active[out.stream_id]
                    for frame in out.frames:
                        stream.deliver(frame)
                    if out.done:
                        stream.deliver(_END)
                        del self._active[out.stream_id]
        finally:
            batch.close()
            self._fail_all(EngineUnavailable("the Pocket TTS engine was closed"))
            with self._lock:
                jobs, self._jobs = list(self._jobs), collections.deque()
            for _, future in jobs:
                future.cancel()

    def _run_jobs(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    return
                job, future = self._jobs.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to the awaiting caller
                future.set_exception(exc)

    def _drop_cancelled(self, batch: PausableBatch) -> None:
        now = time.monotonic()
        for stream_id, stream in list(self._active.items()):
            stalled = stream.paused and now - stream.paused_since > self.stall_timeout_s
            if stream.cancelled or stalled:
                if stalled:
                    log.warning("dropping a TTS stream whose consumer read nothing for %.0f s", self.stall_timeout_s)
                batch.remove(stream_id)
                del self._active[stream_id]
                stream.deliver(_END)

    def _admit(self, batch: PausableBatch) -> None:
        while len(batch) < self.max_streams:
            with self._lock:
                if not self._waiting:
                    return
                stream = self._waiting.popleft()
            if stream.cancelled:
                stream.deliver(_END)
                continue
            try:
                stream.stream_id = batch.add(stream.text, stream.voice, stream.settings, stream.seed)
            except EngineError as exc:
                stream.deliver(exc)
                continue
            except ValueError as exc:
                stream.deliver(EngineError(str(exc), code="bad_request"))
                continue
            self._active[stream.stream_id] = stream

    def _update_pauses(self) -> set[int]:
        paused = set()
        for stream_id, stream in self._active.items():
            buffered = stream.buffered
            if not stream.paused and buffered >= self.high_water:
                stream.paused, stream.paused_since = True, time.monotonic()
            elif stream.paused and buffered <= self.low_water:
                stream.paused = False
            if stream.paused:
                paused.add(stream_id)
        return paused

    def _hurried(self, paused: set[int]) -> set[int]:
        """Streams whose listener has less than ``lead_s`` of audio ahead: decode them every step."""
        if self.decode_chunk == 1:
            return set()
        now = time.monotonic()
        hurry = set()
        for stream_id, stream in self._active.items():
            if stream_id in paused or stream.first_frame_at is None:
                continue  # the batch decodes a stream's first frame at once anyway
            lead = stream.delivered * self.frame_s - (now - stream.first_frame_at)
            if lead < self.lead_s:
                hurry.add(stream_id)
        return hurry

    def _fail_all(self, error: EngineError) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting), collections.deque()
        for stream in [*self._active.values(), *waiting]:
            stream.deliver(error)
        self._active.clear()
