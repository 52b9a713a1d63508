"""Per-client failed-attempt counting: a sliding window of recent failures.

A client with ``limit`` failures inside ``window_s`` is locked out until the
oldest of them leaves the window. IPv6 clients are counted per /64, the block a
single host usually controls. The windows live in the auth store, so with a
shared store a client's failures count on every replica; the store bounds
them (memory: the least recently failing client is forgotten past its cap;
Redis: a window expires with its last failure).
"""

from __future__ import annotations

import ipaddress
import math

from .store import AuthStore


def client_bucket(address: str) -> str:
    """The key failures are counted under: the IPv4 address, or the IPv6 /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class FailureLimiter:
    def __init__(self, store: AuthStore, limit: int, window_s: float) -> None:
        self.store = store
        self.limit = limit
        self.window_s = window_s

    async def retry_after_s(self, address: str) -> int | None:
        """Seconds until the client may try again, or None when it is not locked out."""
        ages = await self.store.failure_ages(client_bucket(address), self.window_s)
        if len(ages) < self.limit:
            return None
        return max(1, math.ceil(self.window_s - ages[-self.limit]))

    async def record_failure(self, address: str) -> None:
        await self.store.record_failure(client_bucket(address), self.limit, self.window_s)
