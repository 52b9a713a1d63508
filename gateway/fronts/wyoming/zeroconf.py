"""Optional mDNS announcement of the Wyoming listener (``_wyoming._tcp``), so
Home Assistant discovers it. Needs the ``zeroconf`` package; a listener bound
to loopback is never announced (nobody else could reach it)."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any

from auth.bind import is_loopback_host

log = logging.getLogger("voxgate.wyoming")

SERVICE_TYPE = "_wyoming._tcp.local."
INSTALL_HINT = "pip install zeroconf"


class Announcement:
    """A registered service; ``aclose`` withdraws it."""

    def __init__(self, zeroconf: Any, info: Any) -> None:
        self._zeroconf = zeroconf
        self._info = info

    async def aclose(self) -> None:
        try:
            await self._zeroconf.async_unregister_service(self._info)
        finally:
            await self._zeroconf.async_close()


LanAddress = Callable[[], str | None]  # the machine's IPv4 LAN address (None: none), from the app


def announce_address(host: str, lan_ipv4: LanAddress) -> str | None:
    """The IPv4 address to announce for a listener on ``host`` (``lan_ipv4`` for
    a wildcard bind), or None when it must not (or cannot) be announced."""
    if is_loopback_host(host):
        return None
    if host in ("0.0.0.0", "::", ""):
        return lan_ipv4()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return str(address) if address.version == 4 else None


def service_name(port: int) -> str:
    return f"voxgate-{socket.gethostname().split('.')[0]}-{port}.{SERVICE_TYPE}"


async def announce(host: str, port: int, lan_ipv4: LanAddress) -> Announcement | None:
    """Register the service; None (with the reason logged) when it is not announced."""
    address = announce_address(host, lan_ipv4)
    if address is None:
        log.warning("Wyoming zeroconf: not announcing %s:%d (loopback or no IPv4 LAN address to announce)",
                    host, port)
        return None
    try:
        from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf
    except ImportError:
        log.warning("Wyoming zeroconf: the zeroconf package is not installed (%s); not announcing", INSTALL_HINT)
        return None
    zeroconf = AsyncZeroconf(interfaces=[address])
    info = AsyncServiceInfo(SERVICE_TYPE, service_name(port), addresses=[socket.inet_aton(address)], port=port)
    await zeroconf.async_register_service(info)
    log.info("Wyoming zeroconf: announced %s at %s:%d", info.name, address, port)
    return Announcement(zeroconf, info)
