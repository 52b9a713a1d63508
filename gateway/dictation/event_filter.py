"""The client-facing invariants of a dictation stream's events, kept across a
sidecar restart and replay (gateway/dictation/retention.py): one
``speech_started`` per utterance, ``stable`` only grows, one ``final`` per
utterance, in order, and no partial after it; an ``eager_final`` is not
repeated, no partial follows it, and a ``final`` (or a new ``eager_final``)
with other text than the outstanding ``eager_final`` of its utterance is
preceded by a ``turn_resumed`` (``withdrawn_eager``), so a final always matches
the eager final the client holds.

It also knows, for the replay log, where the open utterances start and which
``finalize`` marks were answered.

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.dictation.pipe import StreamItem
from gateway.protocol.dictation import Discarded, EagerFinal, Final, Finalized, Partial, SpeechStarted, TurnResumed


class EventFilter:
    def __init__(self) -> None:
        self._announced = -1
        self.finished = -1  # highest utterance index that got its final (or had no words)
        self.finished_end = 0  # where the last finished utterance's audio ended (samples)
        self.open_starts: dict[int, int] = {}  # utterance announced, final not yet -> where its audio starts
        self._stable: dict[int, str] = {}
        self.answered: set[str] = set()  # finalize marks already answered (a replay answers them again)
        self._eager: dict[int, str] = {}  # text of the eager final the client holds, per utterance

    @property
    def in_utterance(self) -> bool:
        """True while an utterance the sidecar announced has no final yet."""
        return bool(self.open_starts)

    def resume_point(self) -> tuple[int, str]:
        """The utterance a new sidecar process continues from, and its stable text."""
        first = min(self.open_starts) if self.open_starts else self.finished + 1
        return first, self._stable.get(first, "")

    def accept(self, event: StreamItem) -> bool:
        """Record a sidecar event; False when the client must not see it (a replay duplicate)."""
        if isinstance(event, Finalized):
            if event.id in self.answered:
                return False
            self.answered.add(event.id)
            return True
        if isinstance(event, SpeechStarted):
            n = event.utterance
            if n > self.finished and n not in self.open_starts:
                self.open_starts[n] = event.start_sample
            if n <= self._announced:
                return False
            self._announced = n
            return True
        if isinstance(event, Partial):
            n = event.utterance
            if n <= self.finished or n in self._eager or not event.stable.startswith(self._stable.get(n, "")):
                return False
            self._stable[n] = event.stable
            return True
        if isinstance(event, EagerFinal):
            if event.utterance <= self.finished or self._eager.get(event.utterance) == event.text:
                return False
            self._eager[event.utterance] = event.text
            return True
        if isinstance(event, TurnResumed):
            return self._eager.pop(event.utterance, None) is not None
        if isinstance(event, Final | Discarded):
            return self._finish(event.utterance, event.end_sample)
        return True

    def _finish(self, n: int, end_sample: int) -> bool:
        if n <= self.finished:
            return False
        self.finished = n
        self.finished_end = max(self.finished_end, end_sample)
        for index in [i for i in self.open_starts if i <= n]:
            self.open_starts.pop(index)
            self._stable.pop(index, None)
        for index in [i for i in self._eager if i <= n]:
            self._eager.pop(index)
        return True

    def withdrawn_eager(self, event: StreamItem) -> TurnResumed | None:
        """The ``turn_resumed`` the client must get before ``event``: an eager final,
        final or discard of an utterance whose outstanding eager final said something
        else (a restarted sidecar can decode the replayed audio differently)."""
        if not isinstance(event, EagerFinal | Final | Discarded):
            return None
        n = event.utterance
        held = self._eager.get(n)
        if held is None or n <= self.finished:
            return None
        if isinstance(event, Discarded):
            return TurnResumed(n, round(event.end_sample / ASR_RATE, 3))
        return None if event.text == held else TurnResumed(n, event.end)
