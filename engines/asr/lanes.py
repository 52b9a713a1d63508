"""The sidecar's decode lanes: ``lanes`` threads, each running one unit of work
at a time on the shared model.

A unit of work is a batch of ``DecodeJob``s (decoded together where they share
an encoder window; word-timed jobs one by one) or one window of a file
transcription (files.py). The main thread (server.py) submits work, at most
one unit per free lane, and reads every outcome from its inbox: a decode that
fails is reported there as the exception, and the lane goes on.
"""

from __future__ import annotations

import logging
import queue
import threading

from .decoder import Transcript, window_frames
from .files import FileJob
from .policy import RATE, DecodeJob
from .watch import BusyClock

log = logging.getLogger("voxgate.asr")


class DecodeLanes:
    def __init__(self, decoder: BusyClock, inbox: queue.Queue, lanes: int) -> None:
        self.decoder = decoder
        self.inbox = inbox  # the main thread's: ("file", job, outcome) and ("results", jobs, outcomes)
        self.lanes = lanes
        self._work: queue.Queue = queue.Queue(maxsize=lanes)
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._work_loop, name=f"asr-decoder-{n}", daemon=True)
                         for n in range(self.lanes)]
        for thread in self._threads:
            thread.start()

    def submit(self, work: object) -> None:
        """Hand a lane one unit of work (a list of ``DecodeJob``s or a ``FileJob``, as the
        scheduler gives it); the caller submits only while a lane is free."""
        self._work.put(work)

    def stop(self) -> None:
        """Each lane ends after the work it has."""
        for _ in self._threads:
            self._work.put(None)

    def _work_loop(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            if isinstance(work, FileJob):
                try:
                    work.step(self.decoder)
                    result: FileJob | Exception = work
                except Exception as exc:  # a failed decode is reported, the sidecar goes on
                    log.exception("file decode failed")
                    result = exc
                self.inbox.put(("file", work, result))
            else:
                self.inbox.put(("results", work, self._decode(work)))

    def _decode(self, jobs: list[DecodeJob]) -> list[Transcript | Exception]:
        """Decode a batch: word-timed jobs one by one, the others in groups of one encoder window."""
        results: dict[int, Transcript | Exception] = {}
        windows = {i: j.window() for i, j in enumerate(jobs) if not j.word_timestamps}
        same: dict[tuple[bool, int], list[int]] = {}  # only windows of one encoder window decode together
        for i, w in windows.items():
            same.setdefault((w.full, window_frames(w)), []).append(i)
        groups = [*same.values(), *([i] for i, j in enumerate(jobs) if j.word_timestamps)]
        for group in groups:
            try:
                if jobs[group[0]].word_timestamps:
                    job = jobs[group[0]]
                    decoded = [self.decoder.decode(job.audio, language=job.language, beam_size=job.beam_size,
                                                   prefix=job.prefix, word_timestamps=True,
                                                   offset_s=job.start_sample / RATE, prompt=job.prompt)]
                else:
                    decoded = self.decoder.decode_batch([windows[i] for i in group],
                                                        beam_size=jobs[group[0]].beam_size)
                results.update(zip(group, decoded, strict=True))
            except Exception as exc:  # a failed decode is reported, the sidecar goes on
                log.exception("decode failed")
                results.update((i, exc) for i in group)
        return [results[i] for i in range(len(jobs))]
