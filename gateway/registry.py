"""Registry of live WebSocket sessions: capacity limits, the admin listing and
the drain before a stop.

Owned by the lifespan. Sessions register on accept and unregister in a
``finally``; the registry never holds a session past its socket. While it
drains, new sessions are refused (``Draining``) and every live session that
registered a ``drain`` callback is asked to finish: ``drain(False)`` when the
drain begins (finish the work already taken, then close), ``drain(True)`` at
its deadline (stop now).

A connection that carries sessions without being one (a multi-context socket,
a Wyoming connection) is held here too (``hold``), so the drain reaches it while
it runs no session and waits for it to close; it counts against no limit and
is not listed.

Fair shares: besides its global limit, a kind may have a per-client limit
(``per_client``), counted over the sessions of one *share*: the client's
address after trusted proxy headers (an IPv6 client per /64), whatever
credential it presented, so one client (a key holder, a PIN guest, anonymous or
loopback alike) cannot take every slot, nor widen its share by presenting
several credentials. A session claimed without a share counts only globally.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection

from auth.lockout import client_bucket
from auth.principal import principal_of
from gateway.config import Settings
from gateway.errors import Draining, OverCapacity

DRAINING_MESSAGE = "the server is draining before it stops; retry (another replica will answer)"
# for the over-capacity message
KIND_NOUNS = {"tts": "TTS sessions", "dictation": "dictation streams", "transcription": "file transcriptions"}
SHARE_OF_TOTAL = 4  # a per-client limit left at 0 is this fraction of the global one (at least 1)


def client_label(conn: HTTPConnection) -> str:
    """How the admin listing names a session's client: the address the auth
    middleware resolved (after trusted proxy headers), with the port when that is
    the direct peer's; behind a trusted proxy the port is the proxy's, so it is left out."""
    peer = f"{conn.client.host}:{conn.client.port}" if conn.client else "?"
    principal = principal_of(conn.scope)
    if principal is None or conn.client is None or principal.client == conn.client.host:
        return peer
    return principal.client


def address_share(host: str) -> str:
    """The share of a client at ``host``: the address, an IPv6 one widened to its /64."""
    return client_bucket(host)


def client_share(conn: HTTPConnection) -> str:
    """The share a connection's sessions count against: its client's address as
    the auth middleware resolved it (after trusted proxy headers)."""
    principal = principal_of(conn.scope)
    if principal is not None:
        return address_share(principal.client)
    return address_share(conn.client.host) if conn.client else "?"


def per_client_limit(configured: int, total: int) -> int:
    """A per-client limit: ``configured``, or when it is 0 a quarter of ``total`` (at least 1)."""
    return configured if configured > 0 else max(1, total // SHARE_OF_TOTAL)


@dataclass
class SessionEntry:
    id: str
    kind: str  # "tts" | "dictation" | "transcription"
    client: str
    started_at: float
    describe: Callable[[], dict[str, Any]]  # live counters and lag, read on demand
    drain: Callable[[bool], None] | None = None  # see the module docstring; None: it ends by itself
    share: str | None = None  # the client share it counts against (None: counted only globally)

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "kind": self.kind, "client": self.client,
               "age_s": round(time.monotonic() - self.started_at, 3)}
        out.update(self.describe())
        return out


@dataclass
class SessionRegistry:
    limits: dict[str, int]  # kind -> max concurrent sessions
    per_client: dict[str, int] = field(default_factory=dict)  # kind -> max concurrent sessions of one share
    _entries: dict[str, SessionEntry] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    draining: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) on every removal
    _holds: dict[str, Callable[[bool], None]] = field(default_factory=dict)  # connection -> its drain

    @classmethod
    def for_settings(cls, settings: Settings) -> SessionRegistry:
        """The registry of an app: the global limits and the per-client shares of ``settings``."""
        return cls(limits={"tts": settings.max_tts_sessions, "dictation": settings.max_dictation_streams,
                           "transcription": settings.max_transcriptions},
                   per_client={"tts": per_client_limit(settings.max_tts_sessions_per_client,
                                                       settings.max_tts_sessions),
                               "dictation": per_client_limit(settings.max_dictation_streams_per_client,
                                                             settings.max_dictation_streams)})

    def count(self, kind: str, share: str | None = None) -> int:
        """Live sessions of ``kind``; of one client share when ``share`` is given."""
        return sum(1 for e in self._entries.values() if e.kind == kind and (share is None or e.share == share))

    def has_room(self, kind: str) -> bool:
        return self.count(kind) < self.limits.get(kind, 1 << 30)

    def share_full(self, kind: str, share: str | None) -> bool:
        """True when ``share`` already holds its per-client limit of ``kind``."""
        limit = self.per_client.get(kind)
        return share is not None and limit is not None and self.count(kind, share) >= limit

    def claim(self, kind: str, client: str, describe: Callable[[], dict[str, Any]],
              drain: Callable[[bool], None] | None = None, *, share: str | None = None,
              taken_before_drain: bool = False) -> SessionEntry:
        """Register a session; ``OverCapacity`` (retryable) when ``kind`` is at its
        global limit, or ``share`` holds its per-client limit of ``kind``,
        ``Draining`` (retryable, elsewhere) while the server drains, unless the
        session does work a held connection took before the drain began."""
        if self.draining and not taken_before_drain:
            raise Draining(DRAINING_MESSAGE, retry_after_s=1)
        noun = KIND_NOUNS.get(kind, kind + " sessions")
        if not self.has_room(kind):
            raise OverCapacity(f"too many {noun} (limit {self.limits[kind]}); try again later")
        if self.share_full(kind, share):
            raise OverCapacity(f"too many {noun} from one client (limit {self.per_client[kind]} per client); "
                               "end one of yours or try again later")
        entry = self.add(kind, client, describe, drain, share=share)
        assert entry is not None  # room was checked above, with nothing awaited since
        return entry

    def claim_connection(self, kind: str, conn: HTTPConnection, describe: Callable[[], dict[str, Any]],
                         drain: Callable[[bool], None]) -> SessionEntry:
        """``claim`` for a session that ``conn`` runs: listed under its client's
        ``host:port`` and counted against its client's share."""
        return self.claim(kind, client_label(conn), describe, drain=drain, share=client_share(conn))

    async def run_connection(self, kind: str, conn: HTTPConnection, describe: Callable[[], dict[str, Any]],
                             drain: Callable[[bool], None], refuse: Callable[[OverCapacity], Awaitable[None]],
                             run: Callable[[str], Awaitable[None]]) -> None:
        """Run a session that ``conn`` carries: claimed (``claim_connection``), ``run``
        with its id, removed however it ends. With no room for it nothing runs:
        ``refuse`` tells the client why."""
        try:
            entry = self.claim_connection(kind, conn, describe, drain)
        except OverCapacity as exc:
            await refuse(exc)
            return
        try:
            await run(entry.id)
        finally:
            self.remove(entry.id)

    def add(self, kind: str, client: str, describe: Callable[[], dict[str, Any]],
            drain: Callable[[bool], None] | None = None, *, share: str | None = None) -> SessionEntry | None:
        """Register a session, or return None if ``kind`` is at its global limit
        (the per-client limit is ``claim``'s)."""
        if not self.has_room(kind):
            return None
        sid = f"{kind[:3]}-{next(self._counter)}-{secrets.token_hex(3)}"
        entry = SessionEntry(sid, kind, client, time.monotonic(), describe, drain, share)
        self._entries[sid] = entry
        return entry

    def remove(self, session_id: str) -> None:
        if self._entries.pop(session_id, None) is not None:
            self._signal_change()

    def hold(self, client: str, drain: Callable[[bool], None]) -> str:
        """Hold a connection open until ``release``; ``drain`` is called as a
        session's is. ``Draining`` (retryable, elsewhere) while the server drains."""
        if self.draining:
            raise Draining(DRAINING_MESSAGE, retry_after_s=1)
        hold_id = f"con-{next(self._counter)}-{secrets.token_hex(3)}"
        self._holds[hold_id] = drain
        return hold_id

    def release(self, hold_id: str) -> None:
        if self._holds.pop(hold_id, None) is not None:
            self._signal_change()

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._entries)

    # ---- the drain

    def begin_drain(self) -> None:
        """Refuse new sessions from now on and ask every live one to finish its work."""
        self.draining = True
        self._call_drains(now=False)

    def stop_all(self) -> None:
        """The drain's deadline: every live session stops now."""
        self._call_drains(now=True)

    async def wait_empty(self, timeout_s: float) -> bool:
        """True once no session is live and no connection held; False when
        ``timeout_s`` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._entries or self._holds:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True

    def _call_drains(self, *, now: bool) -> None:
        for entry in list(self._entries.values()):
            if entry.drain is not None:
                entry.drain(now)
        for drain in list(self._holds.values()):
            drain(now)

    def list(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in list(self._entries.values())]
