"""A stream's use of the end-of-turn model: one question per pause, and whether its answer ends the turn.

A stream with a ``turn_threshold`` asks when a pause has lasted
``PolicyTuning.turn_question_after_s`` (96 ms): the model hears the utterance
up to there, its last 8 s at most. The question goes out before the eager
point (160 ms, speculation.py) so that its answer, which takes tens of
milliseconds, is usually in by then; but only a pause that reaches the eager
point can end the turn, so a shorter pause within a sentence never does
whatever the model says. An answer at or above the threshold closes the
utterance at the eager point (or when the answer comes, if later); a lower one
leaves the pause to the silence rule. The answer heard in the pause that
closed an utterance goes out with its final as ``turn_confidence``. An answer
that comes after speech resumed (the speculation's generation moved on) or
after the utterance closed answers for nothing.

Plain data on the sidecar's main thread, like the policy that owns it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .framing import SAMPLE_RATE
from .turn_judge import TurnQuestion
from .turn_model import WINDOW_S
from .utterance import OpenUtterance

HEARD_SAMPLES = WINDOW_S * SAMPLE_RATE  # the model hears this much at most


class TurnEnding:
    def __init__(self, stream: str, threshold: float | None, ask_after: int, end_after: int) -> None:
        self.stream = stream
        self.threshold = threshold
        self.ask_after = ask_after  # samples of silence before the question
        self.end_after = end_after  # samples of silence before a confident answer ends the turn
        self._asked: tuple[int, int] | None = None  # (utterance, generation) of the pause last asked about
        self._question: TurnQuestion | None = None  # asked, not yet handed to the judge
        self._answers: dict[tuple[int, int], float] = {}

    def on_silence(self, u: OpenUtterance, generation: int, silent: int,
                   audio: Callable[[int, int], np.ndarray], end: int) -> bool:
        """The pause has lasted ``silent`` samples, up to ``end``; ``audio(start, end)`` slices the
        stream. True when a confident answer is in and the pause is long enough to end the turn."""
        pause = (u.index, generation)
        if self.threshold is None or silent < self.ask_after:
            return False
        if self._asked != pause:
            self._asked = pause
            self._question = TurnQuestion(self.stream, u.index, generation,
                                          audio(max(u.start, end - HEARD_SAMPLES), end))
        return silent >= self.end_after and self._confident(pause)

    def take(self) -> TurnQuestion | None:
        question, self._question = self._question, None
        return question

    def answer(self, question: TurnQuestion, probability: float | None, u: OpenUtterance | None,
               generation: int, silent: int) -> bool:
        """Record an answer (``silent``: the pause so far); True when it ends the open utterance's turn now."""
        pause = (question.utterance, question.generation)
        if probability is None or u is None or (u.index, generation) != pause or u.silence_since is None:
            return False
        self._answers = {pause: probability}  # only the newest pause matters
        return silent >= self.end_after and self._confident(pause)

    def heard(self, utterance: int, generation: int) -> float | None:
        """The answer in the pause ``(utterance, generation)``, if any came."""
        return self._answers.get((utterance, generation))

    def _confident(self, pause: tuple[int, int]) -> bool:
        answer = self._answers.get(pause)
        return answer is not None and self.threshold is not None and answer >= self.threshold
