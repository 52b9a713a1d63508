"""AuthState: the auth state of one process, owned by the app lifespan.

Sessions, tickets, failure counters and the LAN-share PIN live in an
``AuthStore`` (auth/store.py): by default this process's memory, where they
die with the process (nothing is written to disk); with ``RedisStore`` they
are shared by every replica. ``clock`` (for the default memory store) is
injectable so tests can move time instead of sleeping.

Methods that need the store are async and may raise ``StoreUnavailable``;
checking the API key never needs it. Event loop only (the LAN-share listener
runs on that same loop).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from typing import Any

from .config import ALLOW_SHORT_KEY_ENV, MIN_API_KEY_CHARS, AuthConfig
from .credentials import Credential, CredentialKind
from .lockout import FailureLimiter, client_bucket
from .pin_seal import PinSeal
from .principal import Principal, PrincipalKind
from .share import LanShare, ShareInfo, ShareListener
from .store import AuthStore
from .store_memory import MemoryStore
from .tokens import SESSION_PREFIX, SOURCE_KEY, SOURCE_PIN, SessionStore, TicketStore

__all__ = ["SOURCE_KEY", "SOURCE_PIN", "AuthState", "owner_of"]

log = logging.getLogger("voxgate.auth")

# Principals that stand for the API key: one owner, whatever address they come from.
KEY_KINDS = frozenset({PrincipalKind.API_KEY, PrincipalKind.SESSION})


def pin_binding(generation: int) -> str:
    return f"pin-generation-{generation}"


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
                 clock: Callable[[], float] = time.monotonic, store: AuthStore | None = None) -> None:
        self.config = config
        self.clock = clock
        self.store: AuthStore = store if store is not None else MemoryStore(clock, config.max_tracked_clients)
        self.sessions = SessionStore(self.store, config.session_ttl_s, config.max_sessions,
                                     config.max_sessions_per_guest)
        self.tickets = TicketStore(self.store, config.ticket_ttl_s, config.max_tickets, config.max_tickets_per_guest)
        self.failures = FailureLimiter(self.store, config.lockout_failures, config.lockout_window_s,
                                       config.lockout_block_failures,
                                       fallback=MemoryStore(clock, config.max_tracked_clients))
        self.share = LanShare(self.store, share_listener, config.pin_failure_budget, self._drop_pin_sessions,
                              PinSeal.from_api_key(config.api_key))
        self._key_binding: str | None = None
        self._warned_at: dict[str, float] = {}
        if config.key_is_short:
            log.warning("auth: the API key has fewer than %d characters (allowed by %s); use a longer one",
                        MIN_API_KEY_CHARS, ALLOW_SHORT_KEY_ENV)

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
        """Constant-time check against the API key; never needs the store."""
        key = self.config.api_key
        if key is None:
            return False
        return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), key.encode("utf-8"))

    async def pin_matches(self, presented: str) -> bool:
        """Constant-time check against the live PIN; a failure spends the global budget."""
        return await self.share.check(presented)

    async def pin_active(self) -> bool:
        return await self.share.current() is not None

    def key_looks_like_session(self) -> bool:
        """True when the API key itself starts like a session token, so a bearer
        credential of that shape may be a wrong guess at the key."""
        return self.config.api_key is not None and self.config.api_key.startswith(SESSION_PREFIX)

    def key_principal(self, client: str) -> Principal:
        return Principal(PrincipalKind.API_KEY, client, may_admin=self.config.server_mode)

    async def verify(self, credential: Credential, client: str, *, path: str, websocket: bool) -> Principal | None:
        """The principal a credential stands for, or None when it is invalid."""
        kind, value = credential.kind, credential.value
        if kind is CredentialKind.BEARER:
            if self.key_matches(value):
                return self.key_principal(client)
            if not value.startswith(SESSION_PREFIX):
                return None  # no session token: a wrong key, judged without the store
            return await self._session_principal(value, client)
        if kind is CredentialKind.API_KEY:
            return self.key_principal(client) if self.key_matches(value) else None
        if kind is CredentialKind.SESSION_COOKIE:
            return await self._session_principal(value, client)
        if kind is CredentialKind.TICKET:
            ok = websocket and await self.tickets.redeem(value, path)
            return Principal(PrincipalKind.TICKET, client) if ok else None
        if kind is CredentialKind.PIN:
            return Principal(PrincipalKind.PIN, client) if await self.pin_matches(value) else None
        return None

    # ---- minting

    async def mint_session(self, source: str, owner: str = "key") -> str:
        """A session token standing for the key (``"api_key"``) or the live PIN (``"pin"``),
        held by ``owner`` (``owner_of``); ``QuotaFull`` when the owner holds its cap."""
        binding = await self._key_fingerprint() if source == SOURCE_KEY else await self._pin_binding()
        return await self.sessions.mint(source, binding, owner)

    async def mint_ticket(self, path: str, owner: str = "key") -> str:
        """A ticket for ``path`` held by ``owner``; ``QuotaFull`` when the owner holds its cap."""
        return await self.tickets.mint(path, owner)

    # ---- LAN sharing

    async def start_sharing(self, app: Any) -> ShareInfo:
        return await self.share.enable(app)

    async def stop_sharing(self, *, wait: bool = True) -> None:
        await self.share.disable(wait=wait)

    async def aclose(self) -> None:
        """Stop sharing (with the memory store the PIN dies), wait for the listener
        to stop, and close the store."""
        try:
            await self.share.aclose()
        finally:
            await self.store.aclose()

    # ---- internals

    async def _key_fingerprint(self) -> str:
        # A session minted from the key is bound to this keyed hash of it (no use
        # to anyone who reads the store; the salt is shared by replicas), so a
        # different key ends it.
        if self._key_binding is None:
            salt = await self.store.binding_salt()
            key = self.config.api_key
            self._key_binding = hmac.new(salt, key.encode("utf-8"), hashlib.sha256).hexdigest() if key else ""
        return self._key_binding

    async def _pin_binding(self) -> str:
        return pin_binding(await self.share.generation())

    async def _session_principal(self, token: str, client: str) -> Principal | None:
        grant = await self.sessions.lookup(token)
        if grant is None:
            return None
        if grant.source == SOURCE_KEY:
            binding = await self._key_fingerprint()
            if binding and hmac.compare_digest(grant.binding, binding):
                return Principal(PrincipalKind.SESSION, client, may_admin=self.config.server_mode)
            return None
        if grant.source == SOURCE_PIN:
            shared = await self.store.current_share()  # one read: a live PIN carries its generation
            if shared is not None and grant.binding == pin_binding(shared.generation):
                return Principal(PrincipalKind.PIN_SESSION, client)
        return None

    async def _drop_pin_sessions(self) -> None:
        await self.sessions.revoke_pin_sessions()
