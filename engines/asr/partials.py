"""The partials of a stream's open utterance: when one is due, and what its result shows.

A partial becomes due once ``step`` samples of new audio have arrived since
the last one was taken (the policy's ``partial_step``, which the scheduler
stretches under load), and not
while the speaker pauses (the pause's speculative final decodes that audio;
``PolicyTuning.partials_in_pauses`` turns that off). One runs at a time per
stream, so hypotheses arrive in order. Each result goes through the
utterance's LocalAgreement (agreement.py): the words enough hypotheses agree
on become ``stable`` and are forced as the prefix of the partials after it.

One per stream, for its open utterance (``start`` when one opens); the
policy calls it on the sidecar's main thread.
"""

from __future__ import annotations

from typing import Any

from .agreement import split_words
from .decoder import Transcript
from .framing import SAMPLE_RATE
from .tuning import PolicyTuning
from .utterance import DecodeJob, OpenUtterance, StreamOptions


class Partials:
    def __init__(self, stream: str, options: StreamOptions, tuning: PolicyTuning) -> None:
        self.stream = stream
        self.options = options
        self.tuning = tuning
        self._detect_after = round(tuning.detect_language_after_s * SAMPLE_RATE)
        self.start(0)

    def start(self, at: int) -> None:
        """A new utterance whose speech starts at ``at``."""
        self.due: float | None = None  # when the pending partial became due
        self.running = False
        self.last_pos = at  # where the last partial's audio ended

    def on_audio(self, u: OpenUtterance, pos: int, step: int, now: float) -> None:
        """Audio up to ``pos`` has been heard; ``step``: new audio that makes a partial due."""
        if self.options.interim and (u.silence_since is None or self.tuning.partials_in_pauses) \
                and self.due is None and pos - self.last_pos >= step:
            self.due = now

    def due_since(self, u: OpenUtterance) -> float | None:
        """When the pending partial became due (None: none, one is running, or the speaker pauses)."""
        if self.running or (u.silence_since is not None and not self.tuning.partials_in_pauses):
            return None
        return self.due

    def take(self, pos: int) -> None:
        """The pending partial is handed out, on the audio up to ``pos``."""
        self.due, self.last_pos, self.running = None, pos, True

    def on_result(self, u: OpenUtterance, job: DecodeJob, result: Transcript, lag_s: float, *,
                  shown: bool) -> list[dict[str, Any]]:
        """The utterance's partial came back; ``shown``: whether a partial may go out now."""
        self.running = False
        if not shown:
            return []
        if u.language is None and len(job.audio) >= self._detect_after:
            u.language = result.language  # later decodes of this utterance skip detection
        words = u.agreement.update(split_words(result.text))
        if not words:
            return []
        return [{"ev": "partial", "stream": self.stream, "utterance": u.index, "text": " ".join(words),
                 "stable": u.agreement.stable, "start": round(u.speech_start / SAMPLE_RATE, 3),
                 "end": round(job.end_sample / SAMPLE_RATE, 3), "lag_s": round(lag_s, 3)}]
