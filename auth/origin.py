"""Browser origin checks for ambient credentials.

A browser attaches cookies, and speaks from the user's own address, whatever
page started the request. So a request that relies on those (a cookie, or the
loopback / trusted-network address) must come from the server's own origin or
one in ``allowed_origins`` when it changes something (an HTTP mutation) or opens
a WebSocket, which no CORS rule protects. A request with no ``Origin`` header did
not come from a cross-site page (browsers always send it on those) and passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .credentials import first_header

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


def own_origin(scope: dict, scheme: str) -> str | None:
    """The server's origin as this request addressed it: ``scheme://Host``."""
    host = first_header(scope, "host")
    if not host:
        return None
    return normalize_origin(f"{scheme}://{host.strip()}")


def needs_origin_check(scope: dict) -> bool:
    return scope["type"] == "websocket" or scope.get("method", "GET").upper() not in SAFE_METHODS


def origin_acceptable(scope: dict, scheme: str, allowed_origins: Sequence[str]) -> bool:
    origin = first_header(scope, "origin")
    if origin is None:
        return True
    presented = normalize_origin(origin)
    if presented == own_origin(scope, scheme):
        return True
    return presented in {normalize_origin(o) for o in allowed_origins}
