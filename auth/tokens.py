"""Session tokens and WebSocket tickets: random, in memory only, with a TTL.

Tokens are stored under their SHA-256 digest, so a lookup's timing depends on
the digest, never on how much of a guessed token matches, and the table does
not hold a usable secret.

Both stores are bounded per owner (the principal that minted an entry, see
``owner_of`` in auth/state.py): minting past a cap raises ``QuotaFull`` and
nobody's entries are evicted, so a PIN guest minting in a loop can neither
grow the table without bound nor log the key holder out.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

SESSION_PREFIX = "vgs_"
TICKET_PREFIX = "vgt_"
# Owners with a pool of their own: the API key holder and the gateway's own machine.
PRIVILEGED_OWNERS = frozenset({"key", "loopback"})


def new_token(prefix: str) -> str:
    """A fresh 256-bit token; the prefix only tells humans what it is."""
    return prefix + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class QuotaFull(Exception):
    """The owner holds as many live entries as it may; the message says so and is safe to show."""


class Quota:
    """Live entries per owner. A privileged owner may hold ``total``; every other
    owner ``per_guest``, and all of them together ``total``."""

    def __init__(self, noun: str, total: int, per_guest: int) -> None:
        self.noun = noun
        self.total = total
        self.per_guest = per_guest
        self._owners: Counter[str] = Counter()
        self._guests = 0

    def check(self, owner: str) -> None:
        held = self._owners[owner]
        if owner in PRIVILEGED_OWNERS:
            if held >= self.total:
                raise QuotaFull(f"this credential holds {held} live {self.noun}, the most it may; "
                                "revoke some or wait for them to expire")
            return
        if held >= self.per_guest:
            raise QuotaFull(f"this client holds {held} live {self.noun}, the most it may; "
                            "revoke some or wait for them to expire")
        if self._guests >= self.total:
            raise QuotaFull(f"the server holds {self._guests} live {self.noun} of guests, the most it may; "
                            "try again later")

    def add(self, owner: str) -> None:
        self._owners[owner] += 1
        if owner not in PRIVILEGED_OWNERS:
            self._guests += 1

    def remove(self, owner: str) -> None:
        self._owners[owner] -= 1
        if self._owners[owner] <= 0:
            del self._owners[owner]
        if owner not in PRIVILEGED_OWNERS:
            self._guests -= 1


@dataclass(frozen=True)
class SessionGrant:
    """What a session token stands for.

    ``source`` is ``"api_key"`` or ``"pin"``; ``binding`` ties it to the secret
    that minted it (a fingerprint of the key, or the PIN's generation), so the
    session dies when that secret changes. ``owner`` is who minted it.
    """

    source: str
    binding: str
    expires_at: float
    owner: str = "key"


class SessionStore:
    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float],
                 max_per_guest: int | None = None) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._quota = Quota("sessions", max_entries, max_per_guest if max_per_guest is not None else max_entries)
        self._grants: OrderedDict[bytes, SessionGrant] = OrderedDict()

    def mint(self, source: str, binding: str, owner: str = "key") -> str:
        """A new token for ``owner``; ``QuotaFull`` when ``owner`` holds its cap."""
        self._prune()
        self._quota.check(owner)
        token = new_token(SESSION_PREFIX)
        self._grants[digest(token)] = SessionGrant(source, binding, self._clock() + self.ttl_s, owner)
        self._quota.add(owner)
        return token

    def lookup(self, token: str) -> SessionGrant | None:
        key = digest(token)
        grant = self._grants.get(key)
        if grant is None:
            return None
        if grant.expires_at <= self._clock():
            self._drop(key)
            return None
        return grant

    def revoke(self, token: str) -> bool:
        return self._drop(digest(token))

    def revoke_where(self, predicate: Callable[[SessionGrant], bool]) -> int:
        doomed = [k for k, g in self._grants.items() if predicate(g)]
        for k in doomed:
            self._drop(k)
        return len(doomed)

    def __len__(self) -> int:
        return len(self._grants)

    def _drop(self, key: bytes) -> bool:
        grant = self._grants.pop(key, None)
        if grant is None:
            return False
        self._quota.remove(grant.owner)
        return True

    def _prune(self) -> None:
        now = self._clock()
        # Insertion order is expiry order (one TTL for all), so stop at the first live one.
        while self._grants:
            key, grant = next(iter(self._grants.items()))
            if grant.expires_at > now:
                break
            self._drop(key)


class TicketStore:
    """Single-use tickets, each bound to one WebSocket path."""

    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float],
                 max_per_guest: int | None = None) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._quota = Quota("tickets", max_entries, max_per_guest if max_per_guest is not None else max_entries)
        self._tickets: OrderedDict[bytes, tuple[str, float, str]] = OrderedDict()

    def mint(self, path: str, owner: str = "key") -> str:
        """A new ticket for ``path``; ``QuotaFull`` when ``owner`` holds its cap."""
        self._prune()
        self._quota.check(owner)
        ticket = new_token(TICKET_PREFIX)
        self._tickets[digest(ticket)] = (path, self._clock() + self.ttl_s, owner)
        self._quota.add(owner)
        return ticket

    def redeem(self, ticket: str, path: str) -> bool:
        """True when the ticket is live and bound to ``path``. Any presentation
        uses the ticket up, including one on the wrong path."""
        entry = self._tickets.pop(digest(ticket), None)
        if entry is None:
            return False
        bound_path, expires_at, owner = entry
        self._quota.remove(owner)
        return expires_at > self._clock() and bound_path == path

    def __len__(self) -> int:
        return len(self._tickets)

    def _prune(self) -> None:
        now = self._clock()
        while self._tickets:
            key, (_, expires_at, owner) = next(iter(self._tickets.items()))
            if expires_at > now:
                break
            del self._tickets[key]
            self._quota.remove(owner)
