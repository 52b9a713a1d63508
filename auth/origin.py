"""Browser origin checks for ambient credentials.

A browser attaches cookies, and speaks from the user's own address, whatever
page started the request. So a request that relies on those (a cookie, or the
loopback / trusted-network address) must come from the server's own origin or
one in ``allowed_origins`` when it changes something (an HTTP mutation) or opens
a WebSocket, which no CORS rule protects. A request with no ``Origin`` header did
not come from a cross-site page (browsers always send it on those) and passes.
For loopback clients the server's own origin must also be a loopback one
(``localhost``, ``127.0.0.1``, ``[::1]``), which defeats DNS rebinding.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from .credentials import first_header
from .principal import Scope

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": "80", "https": "443"}


def normalize_origin(origin: str) -> str:
    """Lower-case ``scheme://host[:port]`` with the scheme's default port dropped."""
    origin = origin.strip().lower().rstrip("/")
    scheme, sep, authority = origin.partition("://")
    if not sep:
        return origin
    host, colon, port = authority.rpartition(":")
    if colon and not host.endswith("]") and "]" in port:  # a bare IPv6 literal has no port part
        return origin
    if colon and DEFAULT_PORTS.get(scheme) == port:
        return f"{scheme}://{host}"
    return origin


def own_origin(scope: Scope, scheme: str) -> str | None:
    """The server's origin as this request addressed it: ``scheme://Host``."""
    host = first_header(scope, "host")
    if not host:
        return None
    return normalize_origin(f"{scheme}://{host.strip()}")


def needs_origin_check(scope: Scope) -> bool:
    return scope["type"] == "websocket" or scope.get("method", "GET").upper() not in SAFE_METHODS


def is_loopback_origin(origin: str) -> bool:
    """True when a normalized origin names localhost, 127.0.0.0/8 or [::1]."""
    _, _, authority = origin.partition("://")
    if authority.startswith("[") and "]" in authority:
        host = authority[1:authority.index("]")]
    else:
        host = authority.split(":")[0]
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin_acceptable(scope: Scope, scheme: str, allowed_origins: Sequence[str], *,
                      own_must_be_loopback: bool = False) -> bool:
    """Whether the request's Origin (if any) may use ambient authority.

    ``own_must_be_loopback`` is for loopback clients: their own origin counts only
    when it is a loopback name, because a page whose domain an attacker re-points
    at 127.0.0.1 (DNS rebinding) sends an Origin equal to its Host.
    """
    origin = first_header(scope, "origin")
    if origin is None:
        return True
    presented = normalize_origin(origin)
    if presented == own_origin(scope, scheme) and (not own_must_be_loopback or is_loopback_origin(presented)):
        return True
    return presented in {normalize_origin(o) for o in allowed_origins}
