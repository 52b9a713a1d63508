"""The numbered events of a resumable dictation session, kept so that a client
that reconnects gets the ones it missed (gateway/dictation/resumable.py).

Each event is kept as the JSON text it goes out as, with its ``seq``. The log
holds at most ``max_events`` events and ``max_bytes`` of text: past either, the
oldest go first, except events no socket was given yet (those sent while the
client was away), which are never dropped: an event that would need one of
them dropped is refused, and the session ends (it says so on resume).

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from collections import deque

MAX_EVENTS = 1024  # a held minute of speech sends a few hundred (partials, finals)
MAX_BYTES = 256 * 1024


class EventLog:
    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._entries: deque[tuple[int, str]] = deque()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, seq: int, text: str, unsent_from: int | None) -> bool:
        """Keep event ``seq``; False (nothing kept) when that would drop an event
        numbered ``unsent_from`` or later (None: every kept event was sent)."""
        self._entries.append((seq, text))
        self.bytes += len(text)
        while len(self._entries) > self.max_events or self.bytes > self.max_bytes:
            first_seq, first = self._entries[0]
            if unsent_from is not None and first_seq >= unsent_from:
                self._entries.pop()
                self.bytes -= len(text)
                return False
            self._entries.popleft()
            self.bytes -= len(first)
        return True

    def after(self, last_seq: int, newest: int) -> list[str] | None:
        """The events numbered after ``last_seq`` up to ``newest`` (the last number
        given out), or None when some of them are no longer kept."""
        if last_seq >= newest:
            return []
        if not self._entries or self._entries[0][0] > last_seq + 1:
            return None
        return [text for seq, text in self._entries if seq > last_seq]
