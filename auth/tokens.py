"""Session tokens and WebSocket tickets: random, with a TTL, kept in the auth
store (auth/store.py: this process's memory, or Redis shared by replicas).

Tokens are stored under their SHA-256 digest, so a lookup's timing depends on
the digest, never on how much of a guessed token matches, and the store does
not hold a usable secret. The rules are here, the same for every store: how
many live tokens there may be (``caps``: minting past a cap is refused with
``QuotaFull``, nobody's tokens are evicted), that a ticket opens one socket
on the path it was minted for, and that sessions minted from the PIN end
together when the PIN changes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass

from .store import SESSIONS, TICKETS, AuthStore, Cap

SESSION_PREFIX = "vgs_"
TICKET_PREFIX = "vgt_"
SOURCE_KEY = "api_key"  # a session minted from the API key
SOURCE_PIN = "pin"  # ... from the LAN-share PIN
PIN_TAG = "pin"  # the tag of sessions minted from the PIN: they end together with it


def new_token(prefix: str) -> str:
    """A fresh 256-bit token; the prefix only tells humans what it is."""
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class QuotaFull(Exception):
    """As many live tokens exist as may; the message says so and is safe to show."""


def caps(limit: int) -> list[Cap]:
    """The quota counters a new token counts in: all tokens of its kind, at most ``limit``."""
    return [Cap("all", limit)]


def _full(noun: str, cap: Cap) -> QuotaFull:
    return QuotaFull(f"the server holds {cap.limit} live {noun}, the most it may; try again later")


@dataclass(frozen=True)
class SessionGrant:
    """What a session token stands for.

    ``source`` is ``"api_key"`` or ``"pin"``; ``binding`` ties it to the secret
    that minted it (a fingerprint of the key, or the PIN's generation), so the
    session dies when that secret changes.
    """

    source: str
    binding: str


class SessionStore:
    def __init__(self, store: AuthStore, ttl_s: float, max_entries: int) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self._max = max_entries

    async def mint(self, source: str, binding: str) -> str:
        """A new token; ``QuotaFull`` at the cap."""
        token = new_token(SESSION_PREFIX)
        value = json.dumps({"source": source, "binding": binding})
        tags = [PIN_TAG] if source == SOURCE_PIN else []
        full = await self.store.put_token(SESSIONS, digest(token), value, self.ttl_s, caps(self._max), tags)
        if full is not None:
            raise _full("sessions", full)
        return token

    async def lookup(self, token: str) -> SessionGrant | None:
        raw = await self.store.get_token(SESSIONS, digest(token))
        if raw is None:
            return None
        data = json.loads(raw)
        return SessionGrant(str(data["source"]), str(data["binding"]))

    async def revoke(self, token: str) -> bool:
        return await self.store.delete_token(SESSIONS, digest(token))

    async def revoke_pin_sessions(self) -> int:
        return await self.store.delete_tagged(SESSIONS, PIN_TAG)


class TicketStore:
    """Single-use tickets, each bound to one WebSocket path."""

    def __init__(self, store: AuthStore, ttl_s: float, max_entries: int) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self._max = max_entries

    async def mint(self, path: str) -> str:
        """A new ticket for ``path``; ``QuotaFull`` at the cap."""
        ticket = new_token(TICKET_PREFIX)
        full = await self.store.put_token(TICKETS, digest(ticket), path, self.ttl_s, caps(self._max))
        if full is not None:
            raise _full("tickets", full)
        return ticket

    async def redeem(self, ticket: str, path: str) -> bool:
        """True when the ticket is live and bound to ``path``. Any presentation
        uses the ticket up (on any replica), including one on the wrong path."""
        bound_path = await self.store.take_token(TICKETS, digest(ticket))
        return bound_path is not None and bound_path == path
