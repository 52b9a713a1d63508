"""A bounded pool of worker threads that runs Piper's ONNX inferences, most
urgent first.

Each job carries a *deadline*: the monotonic time at which its stream's
listener runs out of audio (a new utterance: now; a stream that already has
3 s of audio ahead: 3 s after its first audio). Workers always take the job
with the earliest deadline, so the first sentence of a new utterance overtakes
the prefetch of a stream that is still playing, and N concurrent streams run
on ``threads`` cores in parallel instead of one at a time behind a lock.

Concurrency contract: ``submit`` and ``close`` may be called from any thread.
Jobs run on the pool's threads only; a job cancelled before a worker takes it
never runs. ``max_jobs`` bounds the waiting jobs: ``submit`` raises
``PoolFull`` beyond it.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class PoolFull(RuntimeError):
    """More jobs are waiting than the pool accepts."""


class PoolClosed(RuntimeError):
    """The pool was closed; it takes no more jobs."""


@dataclass(order=True)
class _Job:
    deadline: float
    seq: int
    fn: Callable[[], Any] = field(compare=False)
    future: concurrent.futures.Future[Any] = field(compare=False)


class DeadlinePool:
    """``threads`` worker threads taking jobs earliest-deadline-first."""

    def __init__(self, threads: int, max_jobs: int = 256, name: str = "piper") -> None:
        if threads < 1:
            raise ValueError(f"threads: must be at least 1, got {threads}")
        if max_jobs < 1:
            raise ValueError(f"max_jobs: must be at least 1, got {max_jobs}")
        self.threads = threads
        self.max_jobs = max_jobs
        self._heap: list[_Job] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._busy = 0
        self._workers = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        for worker in self._workers:
            worker.start()

    @property
    def waiting(self) -> int:
        """Jobs submitted and not yet taken by a worker."""
        with self._cond:
            return len(self._heap)

    @property
    def busy(self) -> int:
        """Jobs running now (at most ``threads``)."""
        with self._cond:
            return self._busy

    def alone(self) -> bool:
        """True when the calling job is the only one running and none waits
        (a job may then use every core)."""
        with self._cond:
            return self._busy <= 1 and not self._heap

    def submit(self, fn: Callable[[], T], deadline: float) -> concurrent.futures.Future[T]:
        """Queue ``fn``; its future resolves with the result or the exception."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise PoolClosed("the Piper worker pool is closed")
            if len(self._heap) >= self.max_jobs:
                raise PoolFull(f"{len(self._heap)} Piper jobs are waiting (the limit is {self.max_jobs})")
            heapq.heappush(self._heap, _Job(deadline, next(self._seq), fn, future))
            self._cond.notify()
        return future

    def close(self, timeout_s: float = 10.0) -> None:
        """Cancel waiting jobs, let running ones finish, and join the workers."""
        with self._cond:
            self._closed = True
            pending, self._heap = self._heap, []
            self._cond.notify_all()
        for job in pending:
            job.future.cancel()
        for worker in self._workers:
            worker.join(timeout_s)

    def _next_job(self) -> _Job | None:
        with self._cond:
            while not self._heap and not self._closed:
                self._cond.wait()
            if not self._heap:
                return None
            job = heapq.heappop(self._heap)
            self._busy += 1
            return job

    def _work(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            running = job.future.set_running_or_notify_cancel()  # False: cancelled while it waited
            result: Any = None
            error: BaseException | None = None
            if running:
                try:
                    result = job.fn()
                except BaseException as exc:  # handed to the waiter, never lost
                    error = exc
            with self._cond:
                self._busy -= 1  # before the waiter wakes: its next job must see this worker free
            if not running:
                continue
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)
