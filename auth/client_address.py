"""Who the client is at the IP level, after trusted proxy headers.

``X-Forwarded-For`` and ``X-Forwarded-Proto`` are read only when the direct peer
is in ``forwarded_allow_ips``. The client is then the right-most address in
``X-Forwarded-For`` that is not itself a trusted proxy: everything left of it
was written by the client and proves nothing.

Two proxy set-ups fail closed rather than open:
- a trusted proxy that sends no ``X-Forwarded-For`` hides its client, who is then
  an unknown, non-loopback client (never the proxy's own loopback address);
- a loopback peer that sends forwarding headers while it is not a trusted proxy
  is most likely a reverse proxy nobody told the gateway about, relaying remote
  clients: it is not treated as loopback (``via_unknown_proxy``; the policy logs
  a warning), so it cannot open admin routes or consume without a credential.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from .config import IPNetwork
from .credentials import header_values
from .principal import Scope

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


@dataclass(frozen=True)
class ClientAddress:
    host: str  # what failures are counted under and what the logs show
    ip: IPAddress | None  # None when unknown: not an IP (a test client, a unix socket), or hidden by a proxy
    scheme: str  # "http" or "https", as the client sees it
    via_unknown_proxy: bool = False  # a loopback peer relaying someone else (see the module docstring)

    @property
    def is_loopback(self) -> bool:
        return self.ip is not None and self.ip.is_loopback

    def in_networks(self, networks: Sequence[IPNetwork]) -> bool:
        return self.ip is not None and any(self.ip in net for net in networks)


def parse_ip(text: str) -> IPAddress | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[::1]:port" as some proxies write it
        text = text[1:text.index("]")]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def resolve_client(scope: Scope, forwarded_allow_ips: Sequence[IPNetwork]) -> ClientAddress:
    peer = scope.get("client")
    peer_host = str(peer[0]) if peer else "unknown"
    peer_ip = parse_ip(peer_host)
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    if peer_ip is None or not any(peer_ip in net for net in forwarded_allow_ips):
        if peer_ip is not None and peer_ip.is_loopback and any(header_values(scope, h) for h in FORWARDING_HEADERS):
            return ClientAddress(str(peer_ip), None, scheme, via_unknown_proxy=True)
        return ClientAddress(str(peer_ip) if peer_ip else peer_host, peer_ip, scheme)

    proto = ",".join(header_values(scope, "x-forwarded-proto")).split(",")[-1].strip().lower()
    if proto in ("http", "https"):
        scheme = proto
    hops = [h.strip() for h in ",".join(header_values(scope, "x-forwarded-for")).split(",") if h.strip()]
    if not hops:  # the proxy did not say who its client is: someone unknown, never the proxy itself
        return ClientAddress("unknown", None, scheme)
    client_host, client_ip = str(peer_ip), peer_ip
    for hop in reversed(hops):
        hop_ip = parse_ip(hop)
        if hop_ip is None:  # garbage from a trusted proxy: an unknown, non-loopback client
            return ClientAddress("unknown", None, scheme)
        client_host, client_ip = str(hop_ip), hop_ip
        if not any(hop_ip in net for net in forwarded_allow_ips):
            break
    return ClientAddress(client_host, client_ip, scheme)
