"""A stream's use of the end-of-turn model: one question per pause, and whether its answer ends the turn.

A stream with a ``turn_threshold`` asks when a pause reaches its eager point
(speculation.py's ``ends_turn_after``): the model hears the utterance up to
there, its last 8 s at most. An answer at or above the threshold closes the
utterance at once, as the full silence window would have; a lower one leaves
the pause to the silence rule. The answer heard in the pause that closed an
utterance goes out with its final as ``turn_confidence``. An answer that comes
after speech resumed (the speculation's generation moved on) or after the
utterance closed answers for nothing.

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
    def __init__(self, stream: str, threshold: float | None) -> None:
        self.stream = stream
        self.threshold = threshold
        self._asked: tuple[int, int] | None = None  # (utterance, generation) of the pause last asked about
        self._question: TurnQuestion | None = None  # asked, not yet handed to the judge
        self._answers: dict[tuple[int, int], float] = {}

    def on_silence(self, u: OpenUtterance, generation: int, silent: int, ask_after: int,
                   audio: Callable[[int, int], np.ndarray], end: int) -> None:
        """The pause has lasted ``silent`` samples, up to ``end``; ``audio(start, end)`` slices the stream."""
        pause = (u.index, generation)
        if self.threshold is None or silent < ask_after or self._asked == pause:
            return
        self._asked = pause
        self._question = TurnQuestion(self.stream, u.index, generation, audio(max(u.start, end - HEARD_SAMPLES), end))

    def take(self) -> TurnQuestion | None:
        question, self._question = self._question, None
        return question

    def answer(self, question: TurnQuestion, probability: float | None, u: OpenUtterance | None,
               generation: int) -> bool:
        """Record an answer; True when it ends the open utterance's turn now."""
        if probability is None or u is None or (u.index, generation) != (question.utterance, question.generation):
            return False
        self._answers = {(question.utterance, question.generation): probability}  # only the newest pause matters
        return u.silence_since is not None and self.threshold is not None and probability >= self.threshold

    def heard(self, utterance: int, generation: int) -> float | None:
        """The answer in the pause ``(utterance, generation)``, if any came."""
        return self._answers.get((utterance, generation))
