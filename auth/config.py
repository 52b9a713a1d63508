"""The auth settings: one frozen object, built by the app from gateway settings."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from .hosts import normalize_pattern

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_TICKET_PATHS = ("/v1/tts", "/v1/dictation")
# Shorter API keys refuse to start unless explicitly allowed: a key is the one
# credential that opens everything from anywhere, and the lockout slows guessing
# only per address.
MIN_API_KEY_CHARS = 24
ALLOW_SHORT_KEY_ENV = "VOXGATE_ALLOW_SHORT_API_KEY"


def short_key_problem(api_key: str | None, where: str = "VOXGATE_API_KEY") -> str | None:
    """What is wrong with ``api_key`` (read from ``where``), or None when it is long enough.
    Names the settings and the minimum; never shows the key."""
    if api_key is None or len(api_key) >= MIN_API_KEY_CHARS:
        return None
    return (f"the API key in {where} has {len(api_key)} characters; an API key needs at least "
            f"{MIN_API_KEY_CHARS} (make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'). "
            f"Set a longer VOXGATE_API_KEY or VOXGATE_API_KEY_FILE, or {ALLOW_SHORT_KEY_ENV}=1 to start "
            "with this one anyway")


@dataclass(frozen=True)
class AuthConfig:
    """What the middleware enforces.

    ``allowed_origins`` are lower-case ``scheme://host[:port]``; ``allowed_hosts``
    are patterns of auth/hosts.py, allowed next to the loopback names, the bind
    address ``bind_host`` and the LAN-share address. The tunables
    after ``allow_anonymous`` have the defaults of AUTH.md; tests shorten none of
    them, they move the clock instead.
    """

    server_mode: bool = False
    api_key: str | None = field(default=None, repr=False)
    trusted_networks: tuple[IPNetwork, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    forwarded_allow_ips: tuple[IPNetwork, ...] = ()
    allow_anonymous: bool = False
    bind_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    session_ttl_s: float = 8 * 3600
    ticket_ttl_s: float = 30
    lockout_failures: int = 10  # this many failures in the window lock a client (one address) out
    lockout_block_failures: int = 100  # ... and this many from one IPv6 /64, all its addresses together
    lockout_window_s: float = 60
    pin_failure_budget: int = 100  # failed PIN attempts (all clients) before the PIN is revoked
    # Live sessions and tickets: the key holder and loopback may each hold max_*; every
    # other principal (a PIN guest, a trusted-network client, per address) max_*_per_guest,
    # and all of those together max_*. Minting past a cap is refused; nobody's are evicted.
    max_sessions: int = 10_000
    max_sessions_per_guest: int = 100
    max_tickets: int = 10_000
    max_tickets_per_guest: int = 100
    max_tracked_clients: int = 10_000  # failure counters kept; the stalest are dropped past this
    ticket_paths: tuple[str, ...] = DEFAULT_TICKET_PATHS

    def __post_init__(self) -> None:
        for pattern in self.allowed_hosts:
            if normalize_pattern(pattern) != pattern:
                raise ValueError(f"allowed_hosts has {pattern!r}; normalize it with auth.hosts.normalize_pattern")
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("api_key is empty; leave it unset (None) to run without a key")
        if self.lockout_failures < 1 or self.pin_failure_budget < 1:
            raise ValueError("lockout_failures and pin_failure_budget must be at least 1")
        for origin in self.allowed_origins:
            if origin != origin.lower() or "://" not in origin or origin.count("/") > 2:
                raise ValueError(f"allowed_origins has {origin!r}; use lower-case scheme://host[:port]")

    @property
    def has_key(self) -> bool:
        return self.api_key is not None

    @property
    def key_is_short(self) -> bool:
        return self.api_key is not None and len(self.api_key) < MIN_API_KEY_CHARS
