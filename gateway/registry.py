"""Registry of live WebSocket sessions: capacity limits and the admin listing.

Owned by the lifespan. Sessions register on accept and unregister in a
``finally``; the registry never holds a session past its socket.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection

from gateway.errors import OverCapacity

# for the over-capacity message
KIND_NOUNS = {"tts": "TTS sessions", "dictation": "dictation streams", "transcription": "file transcriptions"}


def client_label(conn: HTTPConnection) -> str:
    """How the admin listing names a session's client: ``host:port``."""
    return f"{conn.client.host}:{conn.client.port}" if conn.client else "?"


@dataclass
class SessionEntry:
    id: str
    kind: str  # "tts" | "dictation" | "transcription"
    client: str
    started_at: float
    describe: Callable[[], dict[str, Any]]  # live counters and lag, read on demand

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "kind": self.kind, "client": self.client,
               "age_s": round(time.monotonic() - self.started_at, 3)}
        out.update(self.describe())
        return out


@dataclass
class SessionRegistry:
    limits: dict[str, int]  # kind -> max concurrent sessions
    _entries: dict[str, SessionEntry] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def count(self, kind: str) -> int:
        return sum(1 for e in self._entries.values() if e.kind == kind)

    def has_room(self, kind: str) -> bool:
        return self.count(kind) < self.limits.get(kind, 1 << 30)

    def claim(self, kind: str, client: str, describe: Callable[[], dict[str, Any]]) -> SessionEntry:
        """Register a session; ``OverCapacity`` (retryable) when ``kind`` is at its limit."""
        entry = self.add(kind, client, describe)
        if entry is None:
            raise OverCapacity(f"too many {KIND_NOUNS.get(kind, kind + ' sessions')} "
                               f"(limit {self.limits[kind]}); try again later")
        return entry

    def add(self, kind: str, client: str, describe: Callable[[], dict[str, Any]]) -> SessionEntry | None:
        """Register a session, or return None if ``kind`` is at its limit."""
        if not self.has_room(kind):
            return None
        sid = f"{kind[:3]}-{next(self._counter)}-{secrets.token_hex(3)}"
        entry = SessionEntry(sid, kind, client, time.monotonic(), describe)
        self._entries[sid] = entry
        return entry

    def remove(self, session_id: str) -> None:
        self._entries.pop(session_id, None)

    def list(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in list(self._entries.values())]
