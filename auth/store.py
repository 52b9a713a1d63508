"""Where the auth state lives: the ``AuthStore`` interface.

Two stores implement it: ``MemoryStore`` (auth/store_memory.py, the default:
one process, nothing leaves it) and ``RedisStore`` (auth/store_redis.py,
``VOXGATE_REDIS_URL``: replicas share sessions, tickets, failure counters and
the LAN-share PIN). The rules (who may hold how many tokens, how failures lock
a client out, when the PIN dies) are not here: they live once in tokens.py,
lockout.py and share.py and run unchanged over either store. A store keeps
the data and does the few steps that must be atomic across replicas:

- ``put_token`` stores a token only while every quota counter it counts in is
  under its limit (check and insert in one step, so two replicas cannot both
  take the last place);
- ``take_token`` reads and deletes a token in one step (a ticket opens one
  socket, whichever replica it is presented to);
- ``record_failure`` counts one failure in several windows at once (an
  address and its IPv6 /64), so no replica sees one counted and not the other;
- ``pin_failure`` counts a failed PIN against the PIN it was made for, and
  ``close_share(if_generation=...)`` revokes only that PIN.

Tokens are kept under a digest (the caller's), never the token itself; the
PIN as a sealed record (auth/pin_seal.py) whose key is not in the store. Every
method may raise ``StoreUnavailable``: the network store is unreachable. The
policy then fails closed for credentials that need the store and keeps
serving those that do not (loopback, the API key).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

SESSIONS = "session"
TICKETS = "ticket"


class StoreUnavailable(Exception):
    """The store cannot be reached; the message says which and is safe to log (no secrets)."""


@dataclass(frozen=True)
class Cap:
    """A quota counter a token counts in while it lives, and the counter's limit."""

    counter: str
    limit: int


@dataclass(frozen=True)
class Window:
    """A failure counter: its key, and how many of its latest failures matter (its limit)."""

    key: str
    keep: int


@dataclass(frozen=True)
class SharedPin:
    """The live LAN-share PIN as every replica sees it, and where it was opened.
    ``sealed`` is the record auth/pin_seal.py makes: never the PIN in clear."""

    sealed: str
    generation: int
    host: str
    port: int
    fingerprint: str = ""  # SHA-256 of the listener's TLS certificate; "" when it serves plain HTTP


class AuthStore(Protocol):
    """The auth state's storage; see the module docstring. Async, event loop only."""

    @property
    def shared(self) -> bool:
        """True when other processes see the same state (a network store)."""
        ...

    async def put_token(self, table: str, key: str, value: str, ttl_s: float, caps: Sequence[Cap],
                        tags: Sequence[str] = ()) -> Cap | None:
        """Store ``value`` under ``key`` for ``ttl_s`` unless one of ``caps`` is
        full; return that cap, or None when stored. ``tags`` name groups that
        ``delete_tagged`` can end at once."""
        ...

    async def get_token(self, table: str, key: str) -> str | None:
        """The live value under ``key``, or None (unknown or expired)."""
        ...

    async def take_token(self, table: str, key: str) -> str | None:
        """Read and delete in one step: the value for exactly one caller, None for every other."""
        ...

    async def delete_token(self, table: str, key: str) -> bool:
        """True when a live token was deleted."""
        ...

    async def delete_tagged(self, table: str, tag: str) -> int:
        """Delete every token carrying ``tag``; how many."""
        ...

    async def record_failure(self, windows: Sequence[Window], window_s: float) -> None:
        """Count one failure now in each of ``windows``, in one step; in each only the
        latest ``keep`` within ``window_s`` matter."""
        ...

    async def failure_ages(self, keys: Sequence[str], window_s: float) -> list[list[float]]:
        """For each of ``keys``: seconds since each of its failures within ``window_s``, oldest first."""
        ...

    async def current_share(self) -> SharedPin | None:
        """The live PIN, or None when sharing is off."""
        ...

    async def share_generation(self) -> int:
        """Bumped by every open and close: sessions minted from a PIN are bound to it."""
        ...

    async def open_share(self, sealed: str, host: str, port: int, fingerprint: str = "") -> SharedPin:
        """Replace any PIN with the one ``sealed`` under a new generation, its failure count at 0."""
        ...

    async def close_share(self, if_generation: int | None = None) -> bool:
        """End the live PIN (only if it is still ``if_generation``, when given); True when one ended."""
        ...

    async def pin_failure(self, generation: int) -> int:
        """Count a failed attempt against the PIN of ``generation``; the count so far
        (0 when that PIN is no longer live: nothing is counted)."""
        ...

    async def binding_salt(self) -> bytes:
        """A random salt every replica shares, for fingerprints of the API key."""
        ...

    async def ping(self) -> None:
        """Return when the store answers; ``StoreUnavailable`` otherwise."""
        ...

    async def aclose(self) -> None: ...
