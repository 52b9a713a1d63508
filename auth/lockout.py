"""Per-client failed-attempt counting: a sliding window of recent failures.

A client with ``limit`` failures inside ``window_s`` is locked out until the
oldest of them leaves the window. IPv6 clients are counted per /64, the block a
single host usually controls. The table is bounded: past ``max_clients`` the
client that failed least recently is forgotten.
"""

from __future__ import annotations

import ipaddress
import math
from collections import OrderedDict, deque
from collections.abc import Callable


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
    def __init__(self, limit: int, window_s: float, max_clients: int, clock: Callable[[], float]) -> None:
        self.limit = limit
        self.window_s = window_s
        self._max_clients = max_clients
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after_s(self, address: str) -> int | None:
        """Seconds until the client may try again, or None when it is not locked out."""
        times = self._recent(client_bucket(address))
        if times is None or len(times) < self.limit:
            return None
        return max(1, math.ceil(times[0] + self.window_s - self._clock()))

    def record_failure(self, address: str) -> None:
        bucket = client_bucket(address)
        times = self._recent(bucket)
        if times is None:
            times = deque(maxlen=self.limit)
            self._failures[bucket] = times
        times.append(self._clock())
        self._failures.move_to_end(bucket)
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)

    def _recent(self, bucket: str) -> deque[float] | None:
        times = self._failures.get(bucket)
        if times is None:
            return None
        cutoff = self._clock() - self.window_s
        while times and times[0] <= cutoff:
            times.popleft()
        if not times:
            del self._failures[bucket]
            return None
        return times
