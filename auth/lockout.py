"""Per-client failed-attempt counting: sliding windows of recent failures.

Failures are counted twice, separately: per address, and for IPv6 also per /64
(the block one host, or one LAN, usually holds). An address with ``limit``
failures inside ``window_s`` is locked out until the oldest of them leaves the
window; a /64 is locked out at ``block_limit`` failures from all its addresses
together. So a neighbour in the same /64 who guesses wrong locks out only its
own address, while one host rotating through its 2^64 addresses still gets at
most ``block_limit`` guesses a window. The table is bounded: past
``max_clients`` the counter that failed least recently is forgotten.
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict, deque
from collections.abc import Callable


def client_bucket(address: str) -> str:
    """The wider key failures are also counted under: the IPv4 address, or the IPv6 /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def client_key(address: str) -> str:
    """The address itself, normalized (``2001:DB8::1`` and ``2001:db8::1`` are one client)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


class FailureLimiter:
    def __init__(self, limit: int, window_s: float, max_clients: int, clock: Callable[[], float],
                 block_limit: int | None = None) -> None:
        self.limit = limit
        self.block_limit = block_limit if block_limit is not None else 10 * limit
        self.window_s = window_s
        self._max_clients = max_clients
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _counters(self, address: str) -> list[tuple[str, int]]:
        """(key, limit) of every counter ``address`` is subject to."""
        own, block = client_key(address), client_bucket(address)
        counters = [(own, self.limit)]
        if block != own:
            counters.append((block, self.block_limit))
        return counters

    def retry_after_s(self, address: str) -> int | None:
        """Seconds until the client may try again, or None when it is not locked out."""
        waits = []
        for key, limit in self._counters(address):
            times = self._recent(key)
            if times is not None and len(times) >= limit:
                waits.append(max(1, math.ceil(times[-limit] + self.window_s - self._clock())))
        return max(waits) if waits else None

    def record_failure(self, address: str) -> None:
        now = self._clock()
        for key, limit in self._counters(address):
            times = self._recent(key)
            if times is None:
                times = deque(maxlen=limit)
                self._failures[key] = times
            times.append(now)
            self._failures.move_to_end(key)
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)

    def _recent(self, key: str) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        cutoff = self._clock() - self.window_s
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times
