"""Per-client failed-attempt counting: sliding windows of recent failures.

Failures are counted twice, separately: per address, and for IPv6 also per /64
(the block one host, or one LAN, usually holds). An address with ``limit``
failures inside ``window_s`` is locked out until the oldest of them leaves the
window; a /64 is locked out at ``block_limit`` failures from all its addresses
together. So a neighbour in the same /64 who guesses wrong locks out only its
own address, while one host rotating through its 2^64 addresses still gets at
most ``block_limit`` guesses a window.

The windows live in the auth store, so with a shared store a client's failures
count on every replica (both windows in one store step); the store bounds them
(memory: the least recently failing counter is forgotten past its cap; Redis:
a window expires with its last failure).

While a network store is unreachable the windows are counted in this process
instead (``fallback``, a memory store), with the same limits, so guessing keys
is locked out during an outage exactly as it is otherwise; each replica then
counts on its own, from zero. When the store answers again it is
authoritative at once and the process's counts are dropped, not merged: a
client locked out by them only during the outage is let in again, and no
failure is counted twice. A client so gets at most one window's worth of
extra attempts per replica and outage.
"""

from __future__ import annotations

import ipaddress
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .store import AuthStore, StoreUnavailable, Window
from .store_memory import MemoryStore

log = logging.getLogger("voxgate.auth")

T = TypeVar("T")


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
    """Failure windows in ``store``; in ``fallback`` while ``store`` is unreachable.
    Never raises ``StoreUnavailable``."""

    def __init__(self, store: AuthStore, limit: int, window_s: float, block_limit: int | None = None, *,
                 fallback: MemoryStore | None = None) -> None:
        self.store = store
        self.limit = limit
        self.block_limit = block_limit if block_limit is not None else 10 * limit
        self.window_s = window_s
        self.fallback = fallback if fallback is not None else MemoryStore()
        self.counting_locally = False  # True from a failed store call until one succeeds

    def _windows(self, address: str) -> list[Window]:
        """Every counter ``address`` is subject to, with its limit."""
        own, block = client_key(address), client_bucket(address)
        windows = [Window(own, self.limit)]
        if block != own:
            windows.append(Window(block, self.block_limit))
        return windows

    async def retry_after_s(self, address: str) -> int | None:
        """Seconds until the client may try again, or None when it is not locked out."""
        windows = self._windows(address)
        keys = [w.key for w in windows]
        ages = await self._either(lambda store: store.failure_ages(keys, self.window_s))
        waits = [max(1, math.ceil(self.window_s - times[-w.keep]))
                 for w, times in zip(windows, ages, strict=True) if len(times) >= w.keep]
        return max(waits) if waits else None

    async def record_failure(self, address: str) -> None:
        windows = self._windows(address)
        await self._either(lambda store: store.record_failure(windows, self.window_s))

    async def _either(self, step: Callable[[AuthStore], Awaitable[T]]) -> T:
        """``step`` on the store; on the fallback while the store is unreachable."""
        try:
            result = await step(self.store)
        except StoreUnavailable as exc:
            if not self.counting_locally:
                self.counting_locally = True
                log.warning("auth: %s; counting failed attempts in this process until it answers", exc)
            return await step(self.fallback)
        if self.counting_locally:
            self.counting_locally = False
            self.fallback.forget_failures()
            log.warning("auth: the auth store answers again; failed attempts are counted there, "
                        "those counted in this process meanwhile are dropped")
        return result
