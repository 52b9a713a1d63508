"""Flow control of a /v1/tts session: the bounded queue between generation and
the socket.

Frames and events of a session go through ONE ordered queue, so the client sees
them in the order they were produced. Audio is bounded by duration (about 2 s):
when the client reads slower than that, the producer's ``put_audio`` waits, so
generation of that session pauses while other sessions go on. Events are tiny
but still bounded in number: a client that keeps sending messages while reading
nothing overflows them and is treated as stalled.

Single event loop only; not thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Stalled(Exception):
    """The client stopped reading: the queue could not make progress in time."""


@dataclass
class OutItem:
    """One message to send: ``data`` (binary audio) or ``event`` (a dict, or a
    callable building it at send time so counters are final); neither: a final
    item that only closes."""

    owner: Any = None  # the utterance it belongs to (None: session-level)
    data: bytes | None = None
    samples: int = 0
    event: dict[str, Any] | Callable[[], dict[str, Any]] | None = None
    final: bool = False  # the last message of the session: the sender stops after it
    close: tuple[int, str] | None = None  # with ``final``: the close code and reason (default 1000)

    def event_dict(self) -> dict[str, Any]:
        return self.event() if callable(self.event) else dict(self.event or {})


class OutboundQueue:
    """Ordered queue of frames and events, audio bounded by ``max_samples``."""

    def __init__(self, max_samples: int, max_events: int = 64) -> None:
        self.max_samples = max_samples
        self.max_events = max_events
        self._items: collections.deque[OutItem] = collections.deque()
        self._samples = 0
        self._events = 0
        self._changed = asyncio.Event()  # replaced after every change; waiters re-check

    @property
    def queued_samples(self) -> int:
        return self._samples

    def __len__(self) -> int:
        return len(self._items)

    def _has_room(self, samples: int) -> bool:
        # One frame always fits, so a frame larger than the budget cannot deadlock.
        return self._samples == 0 or self._samples + samples <= self.max_samples

    async def _wait_until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def put_audio(self, item: OutItem, timeout_s: float, still_wanted: Callable[[], bool],
                        patient: Callable[[], bool] = lambda: False) -> bool:
        """Queue a frame once there is room. Returns False (and drops the frame) if
        ``still_wanted()`` turned false while waiting (a cancel). Raises ``Stalled``
        if no room appeared within ``timeout_s``, unless ``patient()`` says to wait
        on (a resumable session whose client is away: its transport bounds the wait)."""
        while True:
            try:
                await asyncio.wait_for(self._wait_until(lambda: not still_wanted() or self._has_room(item.samples)),
                                       timeout_s)
                break
            except TimeoutError:
                if not patient():
                    raise Stalled(f"no room for audio for {timeout_s:g} s") from None
        if not still_wanted():
            return False
        self._items.append(item)
        self._samples += item.samples
        self._signal()
        return True

    def put_event(self, item: OutItem) -> None:
        """Queue an event now. Raises ``Stalled`` when too many events are unsent
        (the session's last message is always accepted)."""
        if self._events >= self.max_events and not item.final:
            raise Stalled(f"{self._events} events are waiting for a client that does not read")
        self._items.append(item)
        self._events += 1
        self._signal()

    async def get(self) -> OutItem:
        """The next item, waiting for one (the caller owns the timeout/cancellation)."""
        await self._wait_until(lambda: bool(self._items))
        item = self._items.popleft()
        self._forget(item)
        self._signal()
        return item

    def purge(self, drop: Callable[[OutItem], bool]) -> int:
        """Remove every queued item for which ``drop(item)`` is true; return how many."""
        kept: collections.deque[OutItem] = collections.deque()
        dropped = 0
        for item in self._items:
            if drop(item):
                self._forget(item)
                dropped += 1
            else:
                kept.append(item)
        self._items = kept
        self._signal()
        return dropped

    def wake(self) -> None:
        """Make waiting producers re-check ``still_wanted`` (after a cancel)."""
        self._signal()

    def _forget(self, item: OutItem) -> None:
        if item.data is not None:
            self._samples -= item.samples
        else:
            self._events -= 1
