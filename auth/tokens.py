"""Session tokens and WebSocket tickets: random, with a TTL, kept in the auth
store (auth/store.py: this process's memory, or Redis shared by replicas).

Tokens are stored under their SHA-256 digest, so a lookup's timing depends on
the digest, never on how much of a guessed token matches, and the store does
not hold a usable secret. The rules are here, the same for every store: how
many live tokens each owner may hold (the principal that minted them, see
``owner_of`` in auth/state.py; ``caps_for``: minting past a cap is refused with
``QuotaFull``, nobody's tokens are evicted, so a PIN guest minting in a loop
can neither grow the table without bound nor log the key holder out), that a
ticket opens one socket on the path it was minted for, and that sessions
minted from the PIN end together when the PIN changes. The store checks every
cap and inserts in one step, so replicas cannot together pass a cap.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from .store import SESSIONS, TICKETS, AuthStore, Cap

SESSION_PREFIX = "vgs_"
TICKET_PREFIX = "vgt_"
SOURCE_KEY = "api_key"  # a session minted from the API key
SOURCE_PIN = "pin"  # ... from the LAN-share PIN
PIN_TAG = "pin"  # the tag of sessions minted from the PIN: they end together with it
# Owners with a pool of their own: the API key holder and the gateway's own machine.
PRIVILEGED_OWNERS = frozenset({"key", "loopback"})
GUESTS = "guests"  # the counter every guest's tokens count in together


def new_token(prefix: str) -> str:
    """A fresh 256-bit token; the prefix only tells humans what it is."""
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class QuotaFull(Exception):
    """The owner holds as many live tokens as it may; the message says so and is safe to show."""


def caps_for(owner: str, total: int, per_guest: int) -> list[Cap]:
    """The quota counters a token of ``owner`` counts in. A privileged owner may
    hold ``total``; every other owner ``per_guest``, and all of them together ``total``."""
    if owner in PRIVILEGED_OWNERS:
        return [Cap(f"owner:{owner}", total)]
    return [Cap(f"owner:{owner}", per_guest), Cap(GUESTS, total)]


def _full(noun: str, cap: Cap) -> QuotaFull:
    if cap.counter == GUESTS:
        return QuotaFull(f"the server holds {cap.limit} live {noun} of guests, the most it may; try again later")
    holder = "this credential" if cap.counter.removeprefix("owner:") in PRIVILEGED_OWNERS else "this client"
    return QuotaFull(f"{holder} holds {cap.limit} live {noun}, the most it may; "
                     "revoke some or wait for them to expire")


@dataclass(frozen=True)
class SessionGrant:
    """What a session token stands for.

    ``source`` is ``"api_key"`` or ``"pin"``; ``binding`` ties it to the secret
    that minted it (a fingerprint of the key, or the PIN's generation), so the
    session dies when that secret changes. ``owner`` is who minted it.
    """

    source: str
    binding: str
    owner: str = "key"


class _CappedTokens:
    """Tokens of one kind in the shared store (``table``, a ``prefix`` on each): each
    lives ``ttl_s``; at most ``max_entries`` live at once, and ``max_per_guest`` of
    one guest owner (``caps_for``)."""

    table: ClassVar[str]
    prefix: ClassVar[str]
    noun: ClassVar[str]  # what a full cap's QuotaFull says there are too many of

    def __init__(self, store: AuthStore, ttl_s: float, max_entries: int, max_per_guest: int | None = None) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self._max = max_entries
        self._per_guest = max_per_guest if max_per_guest is not None else max_entries

    async def _mint(self, value: str, owner: str, tags: Sequence[str] = ()) -> str:
        """A new token holding ``value``; ``QuotaFull`` when a cap it counts in is full."""
        token = new_token(self.prefix)
        full = await self.store.put_token(self.table, digest(token), value, self.ttl_s,
                                          caps_for(owner, self._max, self._per_guest), tags)
        if full is not None:
            raise _full(self.noun, full)
        return token


class SessionStore(_CappedTokens):
    table, prefix, noun = SESSIONS, SESSION_PREFIX, "sessions"

    async def mint(self, source: str, binding: str, owner: str = "key") -> str:
        """A new token held by ``owner``; ``QuotaFull`` when a cap it counts in is full."""
        value = json.dumps({"source": source, "binding": binding, "owner": owner})
        return await self._mint(value, owner, [PIN_TAG] if source == SOURCE_PIN else [])

    async def lookup(self, token: str) -> SessionGrant | None:
        raw = await self.store.get_token(SESSIONS, digest(token))
        if raw is None:
            return None
        data = json.loads(raw)
        return SessionGrant(str(data["source"]), str(data["binding"]), str(data.get("owner", "key")))

    async def revoke(self, token: str) -> bool:
        return await self.store.delete_token(SESSIONS, digest(token))

    async def revoke_pin_sessions(self) -> int:
        return await self.store.delete_tagged(SESSIONS, PIN_TAG)


class TicketStore(_CappedTokens):
    """Single-use tickets, each bound to one WebSocket path."""

    table, prefix, noun = TICKETS, TICKET_PREFIX, "tickets"

    async def mint(self, path: str, owner: str = "key") -> str:
        """A new ticket for ``path`` held by ``owner``; ``QuotaFull`` when a cap it counts in is full."""
        return await self._mint(path, owner)

    async def redeem(self, ticket: str, path: str) -> bool:
        """True when the ticket is live and bound to ``path``. Any presentation
        uses the ticket up (on any replica), including one on the wrong path."""
        bound_path = await self.store.take_token(TICKETS, digest(ticket))
        return bound_path is not None and bound_path == path
