"""Session tokens and WebSocket tickets: random, in memory only, with a TTL.

Tokens are stored under their SHA-256 digest, so a lookup's timing depends on
the digest, never on how much of a guessed token matches, and the table does
not hold a usable secret. Both stores are bounded: past the cap the oldest
entry is dropped.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

SESSION_PREFIX = "vgs_"
TICKET_PREFIX = "vgt_"


def new_token(prefix: str) -> str:
    """A fresh 256-bit token; the prefix only tells humans what it is."""
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class SessionGrant:
    """What a session token stands for.

    ``source`` is ``"api_key"`` or ``"pin"``; ``binding`` ties it to the secret
    that minted it (a fingerprint of the key, or the PIN's generation), so the
    session dies when that secret changes.
    """

    source: str
    binding: str
    expires_at: float


class SessionStore:
    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._grants: OrderedDict[bytes, SessionGrant] = OrderedDict()

    def mint(self, source: str, binding: str) -> str:
        self._prune()
        token = new_token(SESSION_PREFIX)
        self._grants[digest(token)] = SessionGrant(source, binding, self._clock() + self.ttl_s)
        while len(self._grants) > self._max:
            self._grants.popitem(last=False)
        return token

    def lookup(self, token: str) -> SessionGrant | None:
        key = digest(token)
        grant = self._grants.get(key)
        if grant is None:
            return None
        if grant.expires_at <= self._clock():
            del self._grants[key]
            return None
        return grant

    def revoke(self, token: str) -> bool:
        return self._grants.pop(digest(token), None) is not None

    def revoke_where(self, predicate: Callable[[SessionGrant], bool]) -> int:
        doomed = [k for k, g in self._grants.items() if predicate(g)]
        for k in doomed:
            del self._grants[k]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._grants)

    def _prune(self) -> None:
        now = self._clock()
        # Insertion order is expiry order (one TTL for all), so stop at the first live one.
        while self._grants:
            key, grant = next(iter(self._grants.items()))
            if grant.expires_at > now:
                break
            del self._grants[key]


class TicketStore:
    """Single-use tickets, each bound to one WebSocket path."""

    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float]) -> None:
        self.ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._tickets: OrderedDict[bytes, tuple[str, float]] = OrderedDict()

    def mint(self, path: str) -> str:
        self._prune()
        ticket = new_token(TICKET_PREFIX)
        self._tickets[digest(ticket)] = (path, self._clock() + self.ttl_s)
        while len(self._tickets) > self._max:
            self._tickets.popitem(last=False)
        return ticket

    def redeem(self, ticket: str, path: str) -> bool:
        """True when the ticket is live and bound to ``path``. Any presentation
        uses the ticket up, including one on the wrong path."""
        entry = self._tickets.pop(digest(ticket), None)
        if entry is None:
            return False
        bound_path, expires_at = entry
        return expires_at > self._clock() and bound_path == path

    def __len__(self) -> int:
        return len(self._tickets)

    def _prune(self) -> None:
        now = self._clock()
        while self._tickets:
            key, (_, expires_at) = next(iter(self._tickets.items()))
            if expires_at > now:
                break
            del self._tickets[key]
