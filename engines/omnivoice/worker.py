"""The one thread that touches the OmniVoice model.

Jobs (generate one sentence, make a voice prompt, load or unload the model) run
one at a time, in the order they were submitted, so the model never sees two
callers at once. The queue is bounded: ``submit`` raises ``queue.Full`` when it
holds ``max_jobs`` jobs, and the engine turns that into ``over_capacity``. A job
whose future was cancelled before it started is skipped: that is how a
cancelled stream drops its queued sentence.

When no job has run for ``idle_s`` seconds (0: never), ``on_idle`` runs on this
thread, once per idle spell unless it returns False (then again at the next
tick); the engine unloads the model there.

Thread-safety: ``submit`` and ``close`` may be called from any thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)

_STOP = object()


class GenerationWorker:
    def __init__(self, max_jobs: int, idle_s: float = 0.0, on_idle: Callable[[], bool] | None = None,
                 tick_s: float = 0.5, name: str = "omnivoice-worker") -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_jobs)
        self.idle_s, self._on_idle, self._tick_s = idle_s, on_idle, tick_s
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self.jobs_run = 0

    def start(self) -> None:
        self._thread.start()

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Queue ``fn``; its future holds the result. ``queue.Full`` when the queue is full."""
        if self._closed:
            raise RuntimeError("the OmniVoice worker is closed")
        future: Future[Any] = Future()
        self._queue.put_nowait((fn, future))
        return future

    def close(self, timeout_s: float = 30.0) -> None:
        """Cancel queued jobs, let the running one finish (up to ``timeout_s``), stop the thread."""
        self._closed = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                item[1].cancel()
        try:
            self._queue.put(_STOP, timeout=timeout_s)
        except queue.Full:
            log.warning("OmniVoice worker did not take its stop signal")
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        last_job = time.monotonic()
        idle_done = True  # nothing to unload before the first job
        while True:
            try:
                item = self._queue.get(timeout=self._tick_s)
            except queue.Empty:
                if (self.idle_s > 0 and not idle_done and self._on_idle is not None
                        and time.monotonic() - last_job >= self.idle_s):
                    idle_done = self._call_idle()
                continue
            if item is _STOP:
                return
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:  # the caller gets it through the future
                future.set_exception(exc)
            else:
                future.set_result(result)
            self.jobs_run += 1
            last_job, idle_done = time.monotonic(), False

    def _call_idle(self) -> bool:
        try:
            assert self._on_idle is not None
            return self._on_idle()
        except Exception:  # an unload that failed leaves the model loaded; keep serving
            log.exception("OmniVoice idle unload failed")
            return True
