"""AuthState: every piece of auth state of one process, owned by the app lifespan.

Sessions, tickets, failure counters and the LAN-share PIN live here and die with
the process. Nothing is written to disk. ``clock`` is injectable so tests can
move time instead of sleeping.

Not thread-safe: every method runs on the event loop that serves the app (the
LAN-share listener runs on that same loop).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Any

from .config import AuthConfig
from .credentials import Credential, CredentialKind
from .lockout import FailureLimiter, client_bucket
from .principal import Principal, PrincipalKind
from .share import LanShare, ShareInfo, ShareListener
from .tokens import SessionStore, TicketStore

SOURCE_KEY = "api_key"
SOURCE_PIN = "pin"
# Principals that stand for the API key: one owner, whatever address they come from.
KEY_KINDS = frozenset({PrincipalKind.API_KEY, PrincipalKind.SESSION})


def owner_of(principal: Principal) -> str:
    """Who holds the sessions and tickets a principal mints: the key holder, this
    machine, or a guest per address (an IPv6 guest per /64)."""
    if principal.kind in KEY_KINDS:
        return "key"
    if principal.kind is PrincipalKind.LOOPBACK:
        return "loopback"
    return f"{principal.kind.value}:{client_bucket(principal.client)}"


class AuthState:
    def __init__(self, config: AuthConfig, *, share_listener: ShareListener | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.sessions = SessionStore(config.session_ttl_s, config.max_sessions, clock, config.max_sessions_per_guest)
        self.tickets = TicketStore(config.ticket_ttl_s, config.max_tickets, clock, config.max_tickets_per_guest)
        self.failures = FailureLimiter(config.lockout_failures, config.lockout_window_s,
                                       config.max_tracked_clients, clock, config.lockout_block_failures)
        self.share = LanShare(share_listener, config.pin_failure_budget, self._drop_pin_sessions)
        # A session minted from the key is bound to this fingerprint (a keyed hash,
        # so it is no use to anyone who reads it), so a different key ends it.
        self._salt = secrets.token_bytes(16)
        self._key_binding = self._fingerprint(config.api_key) if config.api_key else ""
        self._warned_at: dict[str, float] = {}

    def warning_due(self, topic: str, every_s: float) -> bool:
        """True at most once per ``every_s`` per ``topic``: for warnings a client can trigger at will."""
        now = self.clock()
        last = self._warned_at.get(topic)
        if last is not None and now - last < every_s:
            return False
        self._warned_at[topic] = now
        return True

    # ---- credentials

    def key_matches(self, presented: str) -> bool:
        key = self.config.api_key
        if key is None:
            return False
        return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), key.encode("utf-8"))

    def pin_matches(self, presented: str) -> bool:
        """Constant-time check against the live PIN; a failure spends the global budget."""
        return self.share.check(presented)

    @property
    def pin_active(self) -> bool:
        return self.share.active is not None

    def verify(self, credential: Credential, client: str, *, path: str, websocket: bool) -> Principal | None:
        """The principal a credential stands for, or None when it is invalid."""
        kind, value = credential.kind, credential.value
        if kind is CredentialKind.BEARER:
            if self.key_matches(value):
                return self._key_principal(client)
            return self._session_principal(value, client)
        if kind is CredentialKind.API_KEY:
            return self._key_principal(client) if self.key_matches(value) else None
        if kind is CredentialKind.SESSION_COOKIE:
            return self._session_principal(value, client)
        if kind is CredentialKind.TICKET:
            ok = websocket and self.tickets.redeem(value, path)
            return Principal(PrincipalKind.TICKET, client) if ok else None
        if kind is CredentialKind.PIN:
            return Principal(PrincipalKind.PIN, client) if self.pin_matches(value) else None
        return None

    # ---- minting

    def mint_session(self, source: str, owner: str = "key") -> str:
        """A session token standing for the key (``"api_key"``) or the live PIN (``"pin"``),
        held by ``owner`` (``owner_of``); ``QuotaFull`` when the owner holds its cap."""
        binding = self._key_binding if source == SOURCE_KEY else self._pin_binding()
        return self.sessions.mint(source, binding, owner)

    def mint_ticket(self, path: str, owner: str = "key") -> str:
        """A ticket for ``path`` held by ``owner``; ``QuotaFull`` when the owner holds its cap."""
        return self.tickets.mint(path, owner)

    # ---- LAN sharing

    async def start_sharing(self, app: Any) -> ShareInfo:
        return await self.share.enable(app)

    async def stop_sharing(self, *, wait: bool = True) -> None:
        await self.share.disable(wait=wait)

    async def aclose(self) -> None:
        """Stop sharing (the PIN dies) and wait for the listener to stop."""
        await self.share.aclose()

    # ---- internals

    def _fingerprint(self, secret: str) -> str:
        return hmac.new(self._salt, secret.encode("utf-8"), hashlib.sha256).hexdigest()

    def _pin_binding(self) -> str:
        return f"pin-generation-{self.share.generation}"

    def _key_principal(self, client: str) -> Principal:
        return Principal(PrincipalKind.API_KEY, client, may_admin=self.config.server_mode)

    def _session_principal(self, token: str, client: str) -> Principal | None:
        grant = self.sessions.lookup(token)
        if grant is None:
            return None
        if grant.source == SOURCE_KEY and self._key_binding and hmac.compare_digest(grant.binding, self._key_binding):
            return Principal(PrincipalKind.SESSION, client, may_admin=self.config.server_mode)
        if grant.source == SOURCE_PIN and self.pin_active and grant.binding == self._pin_binding():
            return Principal(PrincipalKind.PIN_SESSION, client)
        return None

    def _drop_pin_sessions(self) -> None:
        self.sessions.revoke_where(lambda g: g.source == SOURCE_PIN)
