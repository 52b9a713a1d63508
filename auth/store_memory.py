"""``MemoryStore``: the auth state in this process's memory (the default).

Everything dies with the process and nothing is written anywhere. ``clock``
is injectable (monotonic seconds) so tests move time instead of sleeping.
Bounded: tokens by the caps their rules put on them (every token counts in at
least one capped counter), failure windows by ``max_failure_keys`` (past it
the key that failed least recently is forgotten).

Event loop only: no method awaits anything, so each runs as one step.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .store import Cap, SharedPin, Window


@dataclass
class _Entry:
    value: str
    expires_at: float
    counters: tuple[str, ...]
    tags: tuple[str, ...]


class MemoryStore:
    shared = False

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_failure_keys: int = 10_000) -> None:
        self.clock = clock
        self._max_failure_keys = max_failure_keys
        self._tokens: dict[str, _Entry] = {}
        # counter -> entry ids in insertion order; one TTL per table, so that is expiry order too
        self._counters: dict[str, OrderedDict[str, float]] = {}
        self._tagged: dict[str, set[str]] = {}
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._share: SharedPin | None = None
        self._generation = 0
        self._pin_failures = 0
        self._salt = secrets.token_bytes(16)

    # ---- tokens

    async def put_token(self, table: str, key: str, value: str, ttl_s: float, caps: Sequence[Cap],
                        tags: Sequence[str] = ()) -> Cap | None:
        now = self.clock()
        for cap in caps:
            if self._live_count(f"{table}:{cap.counter}", now) >= cap.limit:
                return cap
        entry_id = f"{table}:{key}"
        self._drop(entry_id)
        entry = _Entry(value, now + ttl_s, tuple(f"{table}:{c.counter}" for c in caps),
                       tuple(f"{table}:{t}" for t in tags))
        self._tokens[entry_id] = entry
        for counter in entry.counters:
            self._counters.setdefault(counter, OrderedDict())[entry_id] = entry.expires_at
        for tag in entry.tags:
            self._tagged.setdefault(tag, set()).add(entry_id)
        return None

    def count(self, table: str) -> int:
        """Live and not yet pruned tokens of ``table`` (for tests and the admin)."""
        return sum(1 for entry_id in self._tokens if entry_id.startswith(f"{table}:"))

    async def get_token(self, table: str, key: str) -> str | None:
        entry_id = f"{table}:{key}"
        entry = self._tokens.get(entry_id)
        if entry is None:
            return None
        if entry.expires_at <= self.clock():
            self._drop(entry_id)
            return None
        return entry.value

    async def take_token(self, table: str, key: str) -> str | None:
        value = await self.get_token(table, key)
        self._drop(f"{table}:{key}")
        return value

    async def delete_token(self, table: str, key: str) -> bool:
        return await self.take_token(table, key) is not None

    async def delete_tagged(self, table: str, tag: str) -> int:
        doomed = self._tagged.pop(f"{table}:{tag}", set())
        live = sum(1 for entry_id in doomed if self._drop(entry_id))
        return live

    def _live_count(self, counter: str, now: float) -> int:
        entries = self._counters.get(counter)
        while entries:
            entry_id, expires_at = next(iter(entries.items()))
            if expires_at > now:
                break
            self._drop(entry_id)  # removes it from ``entries`` (and the counter, once empty)
        entries = self._counters.get(counter)
        return len(entries) if entries else 0

    def _drop(self, entry_id: str) -> bool:
        entry = self._tokens.pop(entry_id, None)
        if entry is None:
            return False
        for counter in entry.counters:
            entries = self._counters.get(counter)
            if entries is not None:
                entries.pop(entry_id, None)
                if not entries:
                    del self._counters[counter]
        for tag in entry.tags:
            members = self._tagged.get(tag)
            if members is not None:
                members.discard(entry_id)
                if not members:
                    del self._tagged[tag]
        return entry.expires_at > self.clock()

    # ---- failure windows

    async def record_failure(self, windows: Sequence[Window], window_s: float) -> None:
        now = self.clock()
        for window in windows:
            times = self._recent(window.key, window_s)
            if times is None or times.maxlen != window.keep:
                times = deque(times or (), maxlen=window.keep)
                self._failures[window.key] = times
            times.append(now)
            self._failures.move_to_end(window.key)
        while len(self._failures) > self._max_failure_keys:
            self._failures.popitem(last=False)

    async def failure_ages(self, keys: Sequence[str], window_s: float) -> list[list[float]]:
        now = self.clock()
        return [[now - t for t in self._recent(key, window_s) or ()] for key in keys]

    def forget_failures(self) -> None:
        """Drop every failure window (a fallback's counts, once the shared store is back)."""
        self._failures.clear()

    def _recent(self, key: str, window_s: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        cutoff = self.clock() - window_s
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    # ---- the LAN-share PIN

    async def current_share(self) -> SharedPin | None:
        return self._share

    async def share_generation(self) -> int:
        return self._generation

    async def open_share(self, sealed: str, host: str, port: int, fingerprint: str = "") -> SharedPin:
        self._generation += 1
        self._share = SharedPin(sealed, self._generation, host, port, fingerprint)
        self._pin_failures = 0
        return self._share

    async def close_share(self, if_generation: int | None = None) -> bool:
        share = self._share
        if share is None or (if_generation is not None and share.generation != if_generation):
            return False
        self._share = None
        self._generation += 1
        return True

    async def pin_failure(self, generation: int) -> int:
        if self._share is None or self._share.generation != generation:
            return 0
        self._pin_failures += 1
        return self._pin_failures

    async def binding_salt(self) -> bytes:
        return self._salt

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
