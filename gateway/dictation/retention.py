"""What a sidecar client keeps so that a new sidecar process can take over a stream.

The gateway logs every audio chunk (16 kHz float32) and ``finalize`` (with its
optional mark) it sent for a stream, and drops entries only once no open
utterance needs them: audio is kept from the start of the oldest utterance
without a final, or, when none is open, from the end of the last finished one
(at most a few seconds back, for the VAD onset and the leading pad); never more
than 60 s, so a sidecar that stays down cannot make the gateway's memory grow
without bound. After a restart the client opens the stream again at the first
kept sample (``offset``) with the utterance number and stable text to continue
from, and replays the log. Which utterances are open, and which marks were
answered, the stream's ``EventFilter`` (gateway/dictation/event_filter.py) knows.

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.dictation.event_filter import EventFilter

IDLE_KEEP_SAMPLES = 3 * ASR_RATE
MAX_KEEP_SAMPLES = 60 * ASR_RATE  # bounds memory while a sidecar stays down; a forced cut comes at 25 s anyway


@dataclass(frozen=True)
class FinalizeEntry:
    """A logged ``finalize``; ``mark`` is answered by one ``finalized`` event."""

    mark: str | None = None


class Retention:
    def __init__(self, events: EventFilter) -> None:
        self.events = events
        self.pos = 0  # samples logged so far
        # (position, samples) for audio, (position, FinalizeEntry) for a finalize
        self._log: deque[tuple[int, np.ndarray | FinalizeEntry]] = deque()

    def add_audio(self, samples: np.ndarray) -> None:
        self._log.append((self.pos, samples))
        self.pos += len(samples)
        self.trim()

    def add_finalize(self, mark: str | None = None) -> None:
        self._log.append((self.pos, FinalizeEntry(mark)))

    def __len__(self) -> int:
        return len(self._log)

    def entries(self, start: int) -> list[np.ndarray | FinalizeEntry]:
        """Logged entries from index ``start`` on: audio arrays, or a ``FinalizeEntry``."""
        return [entry for _, entry in list(self._log)[start:]]

    def resume_fields(self) -> dict[str, Any]:
        """``offset``, ``first_utterance`` and ``stable`` for the sidecar's ``open``."""
        first, stable = self.events.resume_point()
        offset = self._log[0][0] if self._log else self.pos
        return {"offset": offset, "first_utterance": first, "stable": stable}

    def trim(self) -> None:
        events = self.events
        if events.open_starts:
            keep_from = min(events.open_starts.values())
        else:
            keep_from = max(events.finished_end, self.pos - IDLE_KEEP_SAMPLES)
        keep_from = max(keep_from, self.pos - MAX_KEEP_SAMPLES)
        while self._log:
            position, entry = self._log[0]
            if isinstance(entry, FinalizeEntry):
                unanswered = entry.mark is not None and entry.mark not in events.answered
                if position > keep_from or (unanswered and position > self.pos - MAX_KEEP_SAMPLES):
                    break
            elif position + len(entry) > keep_from:
                break
            self._log.popleft()
            if isinstance(entry, FinalizeEntry) and entry.mark is not None:
                events.answered.discard(entry.mark)
