"""The finals a stream owes, in utterance order, and the finalize marks waiting on them.

An utterance that closes joins ``PendingFinals`` as a ``ClosedUtterance``. Its
result comes from one of two decodes: its own (handed out once by ``take``,
generation -1), or the speculative decode that was already running when it
closed (``awaits``: that decode's generation; an older speculation still on a
lane answers for nothing). ``flush`` sends what is known, strictly in order: a
final whose result is in waits for every earlier one; an utterance that heard
no words and was not closed by finalize/end goes out as ``discarded``; a
``finalized`` mark goes out right after the final of the last utterance opened
before it. The words of the finals it sends become the stream's recent text in
its ``context`` (context.py), which every later decode is conditioned on.

Plain data on the sidecar's main thread, like the policy that owns it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .agreement import keep_stable_words
from .context import StreamContext
from .decoder import Transcript
from .framing import SAMPLE_RATE
from .term_spelling import respell_transcript
from .utterance import ClosedUtterance, DecodeJob


class PendingFinals:
    def __init__(self, stream: str, word_timestamps: bool, vocabulary: str = "", context_words: int = 0,
                 terms: tuple[str, ...] = ()) -> None:
        self.stream = stream
        self.word_timestamps = word_timestamps
        self.context = StreamContext(vocabulary, context_words, terms)
        self._closed: deque[ClosedUtterance] = deque()
        # (mark, the utterance it closed or None, the last utterance opened before it)
        self._marks: deque[tuple[str, int | None, int]] = deque()

    @property
    def empty(self) -> bool:
        return not self._closed

    def add(self, closed: ClosedUtterance) -> None:
        self._closed.append(closed)

    def add_mark(self, mark: str, closed: int | None, last_opened: int) -> None:
        self._marks.append((mark, closed, last_opened))

    def oldest_undispatched(self) -> ClosedUtterance | None:
        """The oldest utterance whose own decode has not been handed out."""
        return next((c for c in self._closed if not c.dispatched), None)

    def take(self) -> ClosedUtterance | None:
        """Hand out the oldest undispatched utterance's decode (once)."""
        closed = self.oldest_undispatched()
        if closed is not None:
            closed.dispatched = True
        return closed

    def answer(self, job: DecodeJob, result: Transcript) -> None:
        """A final decode came back for a closed utterance: its own, or the speculation it awaits."""
        for c in self._closed:
            if c.index != job.utterance or c.result is not None:
                continue
            if job.generation == -1 or (c.audio is None and c.awaits == job.generation):
                c.result = result
            return

    def flush(self, lag_s: float) -> list[dict[str, Any]]:
        """The events now known, in order."""
        events: list[dict[str, Any]] = []
        while self._closed and self._closed[0].result is not None:
            events.append(self._event(self._closed.popleft(), lag_s))
        while self._marks and (not self._closed or self._closed[0].index > self._marks[0][2]):
            mark, closed, _ = self._marks.popleft()
            events.append({"ev": "finalized", "stream": self.stream, "id": mark, "utterance": closed})
        self.context.remember(events)
        return events

    def _event(self, c: ClosedUtterance, lag_s: float) -> dict[str, Any]:
        r = c.result
        assert r is not None
        if not r.text and not c.stable and not c.forced:
            return {"ev": "discarded", "stream": self.stream, "utterance": c.index, "end_sample": c.cut}
        kept, kept_words = keep_stable_words(c.stable, r.text, r.words)
        text, words = respell_transcript(kept, kept_words, self.context.terms)
        event: dict[str, Any] = {
            "ev": "final", "stream": self.stream, "utterance": c.index, "text": text,
            "start": round(c.speech_start / SAMPLE_RATE, 3), "end": round(c.end / SAMPLE_RATE, 3),
            "language": r.language, "lag_s": round(lag_s, 3), "end_sample": c.cut, "endpoint": c.endpointed}
        if c.turn_confidence is not None:
            event["turn_confidence"] = round(c.turn_confidence, 3)
        if kept != r.text:  # the committed words overrode the decode: a client that needs no prefix may want its own
            event["decoded"] = respell_transcript(r.text, r.words, self.context.terms)[0]
        if self.word_timestamps:
            event["words"] = [w.to_dict() for w in words]
        return event
