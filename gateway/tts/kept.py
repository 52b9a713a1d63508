"""The numbered messages of a resumable TTS session, kept until the client is
known to have them (gateway/tts/resumable.py).

Every message after ``ready`` gets the next number (1, 2, ...), frames and
events alike, and is kept as it goes out (bytes, or the JSON text with its
``seq``). A message leaves when the client acknowledges it (``ack``, or the
``last_seq`` of a resume). The kept messages are bounded by ``max_messages``
and ``max_bytes``; past either:

- a message never handed to a socket (made while the client was away) is
  never dropped: ``has_room`` says no, and the session's sender waits, which
  pauses its synthesis (back-pressure, nothing lost);
- a message already handed to a socket is dropped oldest first, but only
  while a socket is attached and the client has never acknowledged anything;
  a client that acks gets a window instead: nothing it has not acknowledged is
  dropped, and the sender waits for its next ack.

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from collections import deque

MAX_MESSAGES = 512  # about 40 s of 80 ms frames
MAX_BYTES = 1024 * 1024  # about 23 s of 22.05 kHz 16-bit audio, 5 s of 48 kHz float32

Payload = bytes | str


class KeptMessages:
    def __init__(self, max_messages: int = MAX_MESSAGES, max_bytes: int = MAX_BYTES) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.newest = 0  # the last number given out
        self.sent_upto = 0  # the last number handed to a socket
        self.acked = 0  # the last number the client acknowledged
        self.acking = False  # the client acknowledges: what it has not is never dropped
        self.bytes = 0
        self._entries: deque[tuple[int, Payload]] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def oldest(self) -> int:
        """The number of the oldest kept message (``newest + 1`` when none is)."""
        return self._entries[0][0] if self._entries else self.newest + 1

    def has_room(self, size: int, attached: bool) -> bool:
        """Whether a message of ``size`` bytes can be kept now, dropping only what
        may be dropped (``attached``: a socket is attached). An empty log always
        has room, so a message larger than the cap cannot wait forever."""
        if not self._entries:
            return True
        count, total = len(self._entries) + 1, self.bytes + size
        if count <= self.max_messages and total <= self.max_bytes:
            return True
        if not attached or self.acking:
            return False
        for seq, payload in self._entries:
            if seq > self.sent_upto:
                return False
            count, total = count - 1, total - len(payload)
            if count <= self.max_messages and total <= self.max_bytes:
                return True
        return False

    def add(self, payload: Payload, attached: bool) -> int:
        """Keep ``payload`` as the next message (the caller checked ``has_room``); its number."""
        self.newest += 1
        self._entries.append((self.newest, payload))
        self.bytes += len(payload)
        while len(self._entries) > 1 and attached and not self.acking and self._entries[0][0] <= self.sent_upto and (
                len(self._entries) > self.max_messages or self.bytes > self.max_bytes):
            self._pop()
        return self.newest

    def sent(self, seq: int) -> None:
        """Messages up to ``seq`` were handed to a socket."""
        self.sent_upto = max(self.sent_upto, seq)

    def ack(self, seq: int, *, explicit: bool = True) -> None:
        """The client has every message up to ``seq`` (the caller checked ``seq <= newest``)."""
        self.acking = self.acking or explicit
        self.acked = max(self.acked, seq)
        self.sent_upto = max(self.sent_upto, self.acked)
        while self._entries and self._entries[0][0] <= self.acked:
            self._pop()

    def after(self, last_seq: int) -> list[Payload] | None:
        """The messages after ``last_seq``, or None when some of them are no longer kept."""
        if last_seq >= self.newest:
            return []
        if self.oldest > last_seq + 1:
            return None
        return [payload for seq, payload in self._entries if seq > last_seq]

    def _pop(self) -> None:
        _, payload = self._entries.popleft()
        self.bytes -= len(payload)
