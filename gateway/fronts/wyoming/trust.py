"""Who may use the Wyoming listener. Wyoming has no credentials at all, so the
network is the only gate: loopback clients always, others only from a
``VOXGATE_TRUSTED_NETWORKS`` CIDR; and a listener beyond loopback with no
trusted network refuses to start rather than serve everyone."""

from __future__ import annotations

import ipaddress

from auth.bind import is_loopback_host
from gateway.config import Settings


def refuse_wyoming_bind(settings: Settings) -> str | None:
    """The message to refuse start-up with, or None when the Wyoming bind is safe."""
    address = settings.wyoming_address
    if address is None:
        return None
    host, port = address
    if is_loopback_host(host) or settings.trusted_networks:
        return None
    return (f"the Wyoming listener {settings.wyoming_uri} is not on a loopback address, and Wyoming has no "
            "authentication: anyone who can reach the port could use the engines. Set VOXGATE_TRUSTED_NETWORKS "
            "to the CIDRs of your Wyoming clients (e.g. the Home Assistant host: 192.168.1.10/32), or bind the "
            f"listener to loopback (tcp://127.0.0.1:{port}).")


def client_allowed(settings: Settings, host: str) -> bool:
    """True for a loopback client or one inside a trusted network."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return True
    return any(address.version == net.version and address in net for net in settings.trusted_networks)
