"""Which decode runs next, across every stream and file job of the sidecar.

Rules, in order:

1. Finals first, strictly: a final (or a speculative final whose pause has
   lasted ``speculate_after_s``) of any stream goes before any partial or file
   window, round-robin across streams: of the streams with a final due, the one
   whose last final was dispatched longest ago goes first, and within a stream
   the oldest. A stream that sent a minute of speech at once (its client was
   ahead of real time) has its finals served one a round, so another stream's
   final waits for at most one of them, not for all. Several finals of the same
   encoder window are decoded together in one call (a final must decode the
   same in a batch as alone), as many as spread the waiting finals over about two
   rounds of the lanes, at most ``max_batch``: a batch is cheaper per final
   than a call each, but every final in it waits for the whole batch, so a few
   waiting finals go out in small batches over every lane (the first results
   come sooner) and only a deep queue gets full batches (more finals per
   second).
2. Then the early speculative finals of ``eager`` streams (rule 5's, batched
   like finals; ``PolicyTuning.eager_speculation_first``): an agent acts on the
   eager final, so its decode starts at the first silent window even while
   other streams' partials are due.
3. Then a file window, if it has waited longer than every due partial.
4. Then partials, round-robin: the stream whose last partial was dispatched
   longest ago goes first (a stream that just got one waits for the others),
   up to ``partial_batch`` at a time (1 in the sidecar).
5. Then early speculative finals: a stream whose speaker paused less than
   ``speculate_after_s`` (160 ms) ago already has its speculative final due; it
   runs on a lane that nothing above wants (batched like finals), and if the
   pause lasts that long it is a final (rule 1). So a dictation stream's
   speculation, which a short pause may waste, never takes a lane from other
   work, and when many streams stop together and nothing else is due, their
   finals start at once.

Partial cadence adapts to the load: each stream's partial comes after
``partial_step_s`` of new audio while the decoder has room, and after longer
(up to ``max_partial_step_s``) when the streams that are talking would need
more decode time than ``partial_share`` of the lanes (measured from the
partials decoded so far), so partials never crowd out the finals; finals are
never stretched. The knobs are the policy's ``PolicyTuning`` (tuning.py).

Pure logic: the sidecar's main thread calls it; no threads, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Protocol

from .policy import RATE
from .tuning import PolicyTuning
from .utterance import DecodeJob


class StreamWork(Protocol):
    """What the scheduler needs from a stream (``StreamPolicy``; tests use fakes)."""

    partial_step: int
    eager: bool

    @property
    def talking(self) -> bool: ...

    def due_final(self) -> float | None: ...

    def due_early_final(self) -> float | None: ...

    def due_partial(self) -> float | None: ...

    def take_final(self) -> DecodeJob | None: ...

    def final_window(self) -> int | None: ...

    def take_partial(self) -> DecodeJob | None: ...


class FileWork(Protocol):
    since: float


FIRST_PARTIAL_COST_S = 0.1  # a guess until partials have been measured
COST_SMOOTHING = 0.2  # weight of the newest partial's time in the running estimate


class Scheduler:
    def __init__(self, *, lanes: int = 1, max_batch: int = 1, partial_batch: int = 1,
                 tuning: PolicyTuning | None = None) -> None:
        self.tuning = tuning or PolicyTuning()
        self.lanes = lanes
        self.max_batch = max_batch
        self.partial_batch = partial_batch
        self.partial_cost_s = FIRST_PARTIAL_COST_S
        self._served: dict[str, float] = {}  # when each stream's last partial was dispatched
        self._finals_served: dict[str, float] = {}  # when each stream's last final was dispatched

    def observe_partial(self, seconds_per_partial: float) -> None:
        """A partial decode's time (a batch's time divided by its size)."""
        self.partial_cost_s += COST_SMOOTHING * (seconds_per_partial - self.partial_cost_s)

    def partial_step_s(self, talking: int) -> float:
        """Seconds of new audio between two partials of a stream, with ``talking`` streams."""
        needed = talking * self.partial_cost_s / (self.lanes * self.tuning.partial_share)
        return min(self.tuning.max_partial_step_s, max(self.tuning.partial_step_s, needed))

    def forget(self, stream: str) -> None:
        self._served.pop(stream, None)
        self._finals_served.pop(stream, None)

    def next_work(self, streams: Mapping[str, StreamWork], files: deque, now: float) -> list[DecodeJob] | object | None:
        """The next unit of work (a list of jobs to decode together, or a file job
        taken from ``files``), or None when nothing is due."""
        step = int(self.partial_step_s(sum(1 for s in streams.values() if s.talking)) * RATE)
        for policy in streams.values():
            policy.partial_step = step
        finals = self._finals(streams, now, early=False)
        if finals:
            return finals
        if self.tuning.eager_speculation_first:
            agents = {sid: s for sid, s in streams.items() if s.eager}
            early = self._finals(agents, now, early=True) if agents else []
            if early:
                return early
        partials = sorted((since, sid) for sid, s in streams.items() if (since := s.due_partial()) is not None)
        if files and (not partials or files[0].since < partials[0][0]):
            return files.popleft()
        if not partials:
            return self._finals(streams, now, early=True) or None
        order = sorted(partials, key=lambda p: (self._served.get(p[1], float("-inf")), p[0]))
        jobs = []
        for _, sid in order[:self.partial_batch]:
            job = streams[sid].take_partial()
            if job is not None:
                self._served[sid] = now
                jobs.append(job)
        return jobs or None

    def final_batch(self, waiting: int) -> int:
        """How many of ``waiting`` due finals go into the next call."""
        return max(1, min(self.max_batch, -(-waiting // (self.tuning.final_rounds * self.lanes))))

    def _finals(self, streams: Mapping[str, StreamWork], now: float, *, early: bool) -> list[DecodeJob]:
        def due(stream: StreamWork) -> float | None:
            return stream.due_early_final() if early else stream.due_final()

        jobs: list[DecodeJob] = []
        limit = self.final_batch(sum(1 for s in streams.values() if due(s) is not None))
        window = None  # the first final's encoder window: only finals of the same one join it
        while len(jobs) < limit:
            waiting = [(self._finals_served.get(sid, float("-inf")), since, sid) for sid, s in streams.items()
                       if (since := due(s)) is not None and (window is None or s.final_window() == window)]
            if not waiting:
                break
            sid = min(waiting)[2]
            stream = streams[sid]
            window = stream.final_window()
            job = stream.take_final()
            if job is None:
                break
            self._finals_served[sid] = now
            jobs.append(job)
        return jobs
