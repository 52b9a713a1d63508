"""The session's audio as its client plays it, for a cancel that says how much
was played (``cancel.played_ms``).

Positions count samples at the client's rate from the session's start. Every
utterance's audio sits where its first message was sent; a cancel that names
the played position rebases the timeline there, because the audio sent past it
was never heard (the client drops it). A cancel without one rebases it on the
audio sent. The text heard of the utterance playing at that position comes
from its engine's marks (spans.py).

Bounded: it remembers the last ``MAX_HISTORY`` utterances since the last cancel
(a played position before the oldest of them finds none).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

from gateway.errors import BadMessage
from gateway.tts.spans import split_text, stream_marks
from gateway.tts.utterance import Utterance

MAX_HISTORY = 256
FIELD = "cancel.played_ms"


@dataclass(frozen=True)
class Heard:
    """What a cancel answers: the utterance at the played position (None: none had
    started there) and how its text splits; ``played_ms`` the position itself."""

    utterance: Utterance | None
    played_ms: int
    spoken: str
    remaining: str


class PlayTimeline:
    def __init__(self, client_rate: int, native_rate: int) -> None:
        self.client_rate = client_rate
        self.native_rate = native_rate
        self.position = 0  # the end of the audio sent
        self.base = 0  # where the last cancel left the timeline
        self._history: deque[Utterance] = deque(maxlen=MAX_HISTORY)

    def ms(self, samples: int) -> float:
        return samples * 1000 / self.client_rate

    def sent(self, utt: Utterance, samples: int) -> None:
        """``samples`` of ``utt``'s audio went out."""
        if utt.timeline_start is None:
            utt.timeline_start = self.position
            self._history.append(utt)
        self.position += samples

    def check(self, played_ms: int) -> None:
        """Refuse a played position the timeline cannot hold (``BadMessage`` naming the field)."""
        base_ms, sent_ms = self.ms(self.base), math.ceil(self.ms(self.position))
        if played_ms < base_ms:
            raise BadMessage(f"{FIELD} {played_ms} is before {base_ms:.0f}, where the previous cancel left this "
                             "session's audio (played_ms counts the audio played since the session started)",
                             extra={"field": FIELD})
        if played_ms > sent_ms:
            raise BadMessage(f"{FIELD} {played_ms} is past the {sent_ms} ms of audio this session sent",
                             extra={"field": FIELD})

    def rebase(self, played_ms: int | None, fallback: Utterance | None) -> Heard:
        """Cut the timeline where the client stopped playing (``check``ed before);
        None: at the end of the audio sent, and the text is not split."""
        played = self.position if played_ms is None else min(self.position, round(played_ms * self.client_rate
                                                                                 / 1000))
        heard = self._heard(played) if played_ms is not None else None
        self.base = self.position = played
        self._history.clear()
        if heard is not None:
            return Heard(heard[0], played_ms or 0, heard[1], heard[2])
        if played_ms is not None and fallback is not None:
            return Heard(fallback, played_ms, "", fallback.text)
        return Heard(fallback, round(self.ms(played)) if played_ms is None else played_ms, "", "")

    def _heard(self, played: int) -> tuple[Utterance, str, str] | None:
        starts = [u.timeline_start or 0 for u in self._history]
        at = bisect.bisect_right(starts, played) - 1
        if at < 0:
            return None
        utt = self._history[at]
        local = played - (utt.timeline_start or 0)
        done = utt.synth_done_at is not None
        native = utt.samples_generated if done and local >= utt.samples_sent else \
            round(min(local, utt.samples_sent) * self.native_rate / self.client_rate)
        marks, exact = stream_marks(utt.stream)
        split = split_text(utt.text, native, marks, word_exact=exact, total=utt.samples_generated if done else None,
                           rate=self.native_rate)
        return utt, split.spoken, split.remaining
