"""What a sidecar client keeps so that a new sidecar process can take over a stream.

The gateway logs every audio chunk (16 kHz float32) and ``finalize`` (with its
optional mark) it sent for a stream, and drops entries only once no open utterance needs them: audio
is kept from the start of the oldest utterance without a final, or, when none
is open, from the end of the last finished one (at most a few seconds back, for
the VAD onset and the leading pad); never more than 60 s, so a sidecar that
stays down cannot make the gateway's memory grow without bound. After a restart the client opens the
stream again at the first kept sample (``offset``) with the utterance number
and stable text to continue from, and replays the log.

It also filters the sidecar's events so the client-facing invariants hold
across a replay: one ``speech_started`` per utterance, ``stable`` only grows,
one ``final`` per utterance, in order, and no partial after it; an
``eager_final`` is not repeated, no partial follows it, and a ``final`` (or a
new ``eager_final``) with other text than the outstanding ``eager_final`` of
its utterance is preceded by a ``turn_resumed`` (``withdrawn_eager``), so a
final always matches the eager final the client holds.

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

RATE = 16000
IDLE_KEEP_SAMPLES = 3 * RATE
MAX_KEEP_SAMPLES = 60 * RATE  # bounds memory while a sidecar stays down; a forced cut comes at 25 s anyway


@dataclass(frozen=True)
class FinalizeEntry:
    """A logged ``finalize``; ``mark`` is answered by one ``finalized`` event."""

    mark: str | None = None


class Retention:
    def __init__(self) -> None:
        self.pos = 0  # samples logged so far
        # (position, samples) for audio, (position, FinalizeEntry) for a finalize
        self._log: deque[tuple[int, np.ndarray | FinalizeEntry]] = deque()
        self._announced = -1
        self._finished = -1  # highest utterance index that got its final (or had no words)
        self._finished_end = 0  # where the last finished utterance's audio ended
        self._open_starts: dict[int, int] = {}
        self._stable: dict[int, str] = {}
        self._answered: set[str] = set()  # finalize marks already answered (a replay answers them again)
        self._eager: dict[int, str] = {}  # text of the eager final the client holds, per utterance

    # ---- the log

    def add_audio(self, samples: np.ndarray) -> None:
        self._log.append((self.pos, samples))
        self.pos += len(samples)
        self.trim()

    def add_finalize(self, mark: str | None = None) -> None:
        self._log.append((self.pos, FinalizeEntry(mark)))

    def __len__(self) -> int:
        return len(self._log)

    @property
    def in_utterance(self) -> bool:
        """True while an utterance the sidecar announced has no final yet."""
        return bool(self._open_starts)

    def entries(self, start: int) -> list[np.ndarray | FinalizeEntry]:
        """Logged entries from index ``start`` on: audio arrays, or a ``FinalizeEntry``."""
        return [entry for _, entry in list(self._log)[start:]]

    def resume_fields(self) -> dict[str, Any]:
        """``offset``, ``first_utterance`` and ``stable`` for the sidecar's ``open``."""
        first = min(self._open_starts) if self._open_starts else self._finished + 1
        offset = self._log[0][0] if self._log else self.pos
        return {"offset": offset, "first_utterance": first, "stable": self._stable.get(first, "")}

    def trim(self) -> None:
        if self._open_starts:
            keep_from = min(self._open_starts.values())
        else:
            keep_from = max(self._finished_end, self.pos - IDLE_KEEP_SAMPLES)
        keep_from = max(keep_from, self.pos - MAX_KEEP_SAMPLES)
        while self._log:
            position, entry = self._log[0]
            if isinstance(entry, FinalizeEntry):
                unanswered = entry.mark is not None and entry.mark not in self._answered
                if position > keep_from or (unanswered and position > self.pos - MAX_KEEP_SAMPLES):
                    break
            elif position + len(entry) > keep_from:
                break
            self._log.popleft()
            if isinstance(entry, FinalizeEntry) and entry.mark is not None:
                self._answered.discard(entry.mark)

    # ---- events from the sidecar

    def accept(self, event: dict[str, Any]) -> bool:
        """Record a sidecar event; False when the client must not see it (a replay duplicate)."""
        kind = event.get("ev")
        if kind == "finalized":
            mark = str(event.get("id"))
            if mark in self._answered:
                return False
            self._answered.add(mark)
            self.trim()
            return True
        n = int(event.get("utterance", -1))
        if kind == "speech_started":
            if n > self._finished and n not in self._open_starts:
                self._open_starts[n] = int(event.get("start_sample", 0))
            if n <= self._announced:
                return False
            self._announced = n
            return True
        if kind == "partial":
            if n <= self._finished or n in self._eager or not str(event["stable"]).startswith(self._stable.get(n, "")):
                return False
            self._stable[n] = str(event["stable"])
            return True
        if kind == "eager_final":
            if n <= self._finished or self._eager.get(n) == event["text"]:
                return False
            self._eager[n] = str(event["text"])
            return True
        if kind == "turn_resumed":
            return self._eager.pop(n, None) is not None
        if kind in ("final", "discarded"):
            if n <= self._finished:
                return False
            self._finished = n
            self._finished_end = max(self._finished_end, int(event.get("end_sample", 0)))
            for index in [i for i in self._open_starts if i <= n]:
                self._open_starts.pop(index)
                self._stable.pop(index, None)
            for index in [i for i in self._eager if i <= n]:
                self._eager.pop(index)
            self.trim()
            return True
        return True

    def withdrawn_eager(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The ``turn_resumed`` the client must get before ``event``: an eager final,
        final or discard of an utterance whose outstanding eager final said something
        else (a restarted sidecar can decode the replayed audio differently)."""
        if event.get("ev") not in ("eager_final", "final", "discarded"):
            return None
        n = int(event.get("utterance", -1))
        held = self._eager.get(n)
        if held is None or n <= self._finished:
            return None
        if event["ev"] != "discarded" and event.get("text") == held:
            return None
        at = event["end"] if "end" in event else round(int(event.get("end_sample", 0)) / RATE, 3)
        return {"ev": "turn_resumed", "utterance": n, "at": at}
