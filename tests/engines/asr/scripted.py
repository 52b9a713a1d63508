"""A scripted VAD for policy and server tests: speech where the test says."""

from __future__ import annotations

from engines.asr.vad import WINDOW

RATE = 16000


class ScriptedVad:
    """Speech probability 0.9 inside the given (start_s, end_s) spans, 0.05 outside;
    ``dips`` are (at_s, probability) overrides for single windows."""

    def __init__(self, speech: list[tuple[float, float]], offset: int = 0, dips: dict[int, float] | None = None):
        self.speech = speech
        self.next = offset
        self.pending = 0
        self.dips = dips or {}

    def feed(self, samples):
        self.pending += len(samples)
        out = []
        while self.pending >= WINDOW:
            t = (self.next + WINDOW / 2) / RATE
            p = 0.9 if any(a <= t < b for a, b in self.speech) else 0.05
            p = self.dips.get(self.next // WINDOW, p)
            out.append((self.next, p))
            self.next += WINDOW
            self.pending -= WINDOW
        return out
