"""The sidecar's end-of-turn thread: asks the turn model whether a pause ends its turn.

A stream opened with a ``turn_threshold`` asks once per pause, early in the
silence (turn_ending.py): the policy hands out a
``TurnQuestion`` (the utterance's audio up to then) and this thread answers it
on the main thread's inbox as ``("turn", question, probability)``. The model
costs tens of milliseconds a question, so it runs here and never on the main
thread, which owns every stream's VAD. Questions wait in a bounded queue; one
that finds it full is answered at once with no probability, and that pause
then ends by the silence rule, as it would without the model.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("voxgate.asr")

QUEUE_SIZE = 32


@dataclass(frozen=True)
class TurnQuestion:
    stream: str
    utterance: int
    generation: int  # the pause it was asked in: speech coming back makes the answer stale
    audio: np.ndarray  # the utterance up to the question (16 kHz float32)


class TurnJudge:
    """``model``: anything with ``complete(audio) -> float`` (``TurnModel``; tests use fakes)."""

    def __init__(self, model, inbox: queue.Queue) -> None:
        self.model = model
        self.inbox = inbox
        self._questions: queue.Queue = queue.Queue(maxsize=QUEUE_SIZE)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="asr-turn-judge", daemon=True)
        self._thread.start()

    def ask(self, question: TurnQuestion) -> None:
        try:
            self._questions.put_nowait(question)
        except queue.Full:
            self.inbox.put(("turn", question, None))

    def stop(self) -> None:
        with contextlib.suppress(queue.Full):  # a full queue: the thread is a daemon, it ends with the process
            self._questions.put_nowait(None)

    def _loop(self) -> None:
        while True:
            question = self._questions.get()
            if question is None:
                return
            try:
                probability: float | None = self.model.complete(question.audio)
            except Exception:  # a failed question leaves the pause to the silence rule
                log.exception("end-of-turn model failed")
                probability = None
            self.inbox.put(("turn", question, probability))
