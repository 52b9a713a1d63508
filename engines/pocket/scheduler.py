"""One worker thread that owns the Pocket model and steps every stream together.

Every iteration the worker (1) admits waiting streams into the batch (their text
prompt runs then), (2) drops cancelled ones, (3) runs queued exclusive jobs (voice
cloning), then (4) takes the next frame of every active, unpaused stream in ONE
batched forward (``engines.pocket.batch``) and hands the step's frames to their
streams (``engines.pocket.scheduled_stream``): one hand-off per event loop and step.

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

Concurrency contract: ``submit``, ``run_exclusive``, ``wake``, ``load`` and
``close`` may be called from any thread (a stream's own contract is in its module).
Everything touching the model or the batch runs on the worker thread only.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from engines.base import EngineError, EngineUnavailable
from engines.pocket.batch import PausableBatch
from engines.pocket.generation import GenerationSettings
from engines.pocket.scheduled_stream import ScheduledStream, hand_over
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel

log = logging.getLogger(__name__)


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
                raise EngineUnavailable("the Pocket TTS worker is not running", engine="pocket")
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
                raise EngineUnavailable("the Pocket TTS worker is not running", engine="pocket")
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
                hand_over([(self._active[out.stream_id], out.frames, out.done) for out in outputs])
                for out in outputs:
                    if out.done:
                        del self._active[out.stream_id]
        finally:
            batch.close()
            self._fail_all(EngineUnavailable("the Pocket TTS engine was closed", engine="pocket"))
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
                stream.finish()

    def _admit(self, batch: PausableBatch) -> None:
        while len(batch) < self.max_streams:
            with self._lock:
                if not self._waiting:
                    return
                stream = self._waiting.popleft()
            if stream.cancelled:
                stream.finish()
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
