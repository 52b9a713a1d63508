"""The Host allow-list: which names this server answers to.

DNS rebinding points a hostile domain at this machine's address, so a page on
that domain reaches the gateway as the user's own browser, with the user's
loopback or LAN address as its authority and its own domain in ``Host`` (and in
``Origin``, which then looks same-origin). Refusing every request and upgrade
whose ``Host`` names an unknown domain closes that door for reads (GET) as
well as writes, whoever the client is.

A Host is allowed when it is:
- a loopback name or address (``localhost``, ``*.localhost``, 127.0.0.0/8, ``::1``):
  browsers resolve those to this machine without asking DNS;
- the bind address, or any IP literal when the gateway binds every interface
  (``0.0.0.0`` or ``::``): a page can only reach an IP literal under that very
  origin, so an IP literal cannot be rebound;
- the LAN-share listener's address while sharing is on;
- listed in ``allowed_hosts`` (``VOXGATE_ALLOWED_HOSTS``): exact names,
  ``.example.com`` for a domain and its subdomains, or ``*`` for any Host.
The port is ignored: a rebinding page uses the gateway's own port anyway.
A request with no Host at all (HTTP/1.0 tools) is not from a browser and passes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from .credentials import header_values
from .principal import Scope

WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def host_name(value: str) -> str:
    """The name part of a Host header: lower case, no port, no brackets, no trailing dot."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[1:end] if end > 0 else text
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback_name(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    ip = _ip(name)
    return ip is not None and ip.is_loopback


def _listed(name: str, patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern == name:
            return True
        if pattern.startswith(".") and (name == pattern[1:] or name.endswith(pattern)):
            return True
    return False


def host_allowed(scope: Scope, *, bind_host: str, allowed_hosts: Iterable[str], share_host: str | None) -> bool:
    """Whether the request's Host names this server (see the module docstring)."""
    values = header_values(scope, "host")
    if not values:
        return True
    if len(values) > 1:  # two Host headers: a request smuggled past some proxy
        return False
    name = host_name(values[0])
    if not name or is_loopback_name(name):
        return bool(name)
    bind = host_name(bind_host)
    if name == bind or (share_host is not None and name == host_name(share_host)):
        return True
    if bind in WILDCARD_BINDS and _ip(name) is not None:
        return True
    return _listed(name, allowed_hosts)


def normalize_pattern(raw: str) -> str:
    """An ``allowed_hosts`` entry as ``host_allowed`` compares it; ``ValueError`` if it cannot be one."""
    text = raw.strip().lower()
    if text.startswith("*."):
        text = text[1:]
    if text == "*":
        return text
    name = host_name(text[1:]) if text.startswith(".") else host_name(text)
    if not name or any(c in text for c in "/?#@ *"):
        raise ValueError(f"has {raw!r}, which is not a host name (use name, .domain for subdomains, or *)")
    return "." + name if text.startswith(".") else name
