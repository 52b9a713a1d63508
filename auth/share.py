"""LAN sharing: a second listener on the LAN, guarded by a fresh 6-digit PIN.

The PIN lives in memory only. Every enable draws a new one (and a new
generation number, which sessions minted from a PIN are bound to), so turning
sharing off or on again kills every PIN credential in circulation. After
``failure_budget`` failed PIN attempts in total, from any number of clients,
the PIN is revoked: guessing one of 10^6 values with 100 tries has a 1-in-10^4
chance at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

PIN_DIGITS = 6
# Set in the scope by a share listener, so a route can tell it is running on it.
VIA_SHARE_SCOPE_KEY = "voxgate.via_lan_share"
LISTENER_STOP_TIMEOUT_S = 10.0


@runtime_checkable
class ShareListener(Protocol):
    """The second listener LAN sharing opens. It serves ``app`` (the whole app,
    auth included) and reports the address clients should use."""

    @property
    def running(self) -> bool: ...

    async def start(self, app: Any) -> tuple[str, int]:
        """Start serving ``app``; return ``(url_host, port)``. Raises OSError when
        the address cannot be bound. Calling it while running returns the same address."""
        ...

    async def stop(self) -> None:
        """Stop serving; a no-op when not running."""
        ...


class ShareUnavailable(Exception):
    """Sharing cannot start; the message says why and is safe to show."""


@dataclass(frozen=True)
class ShareInfo:
    pin: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/?pin={self.pin}"


def new_pin() -> str:
    return "".join(secrets.choice("0123456789") for _ in range(PIN_DIGITS))


class LanShare:
    """The PIN and the listener, enabled and disabled together."""

    def __init__(self, listener: ShareListener | None, failure_budget: int,
                 on_new_generation: Callable[[], None]) -> None:
        self._listener = listener
        self._budget = failure_budget
        self._on_new_generation = on_new_generation
        self._info: ShareInfo | None = None
        self.generation = 0
        self._failures = 0
        self._lock = asyncio.Lock()
        self._stop_tasks: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> ShareInfo | None:
        return self._info

    async def enable(self, app: Any) -> ShareInfo:
        """Start the listener (if needed) and draw a new PIN."""
        if self._listener is None:
            raise ShareUnavailable("LAN sharing is not available in this deployment")
        async with self._lock:
            try:
                host, port = await self._listener.start(app)
            except OSError as exc:
                raise ShareUnavailable(f"LAN sharing could not start its listener: {exc.strerror or exc}") from None
            self._new_generation()
            self._info = ShareInfo(new_pin(), host, port)
            self._failures = 0
            return self._info

    async def disable(self, *, wait: bool = True) -> None:
        """Revoke the PIN at once and stop the listener. ``wait=False`` stops it in
        the background: a request served by the listener itself must not wait for
        the listener to finish serving it."""
        if not wait:
            self._revoke()
            self._stop_in_background()
            return
        async with self._lock:
            self._revoke()
            if self._listener is not None:
                await self._listener.stop()

    def check(self, presented: str) -> bool:
        """Constant-time PIN check. A failure spends the budget; the last one
        revokes the PIN and stops the listener in the background."""
        info = self._info
        if info is None:
            return False
        if hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), info.pin.encode("ascii")):
            return True
        self._failures += 1
        if self._failures >= self._budget:
            self._revoke()
            self._stop_in_background()
        return False

    async def aclose(self) -> None:
        await self.disable()
        await self.wait_stopped()

    async def wait_stopped(self) -> None:
        """Wait for listener stops running in the background (each bounded)."""
        for task in list(self._stop_tasks):
            with contextlib.suppress(asyncio.TimeoutError):  # wait_for has cancelled it; shutdown goes on
                await asyncio.wait_for(task, LISTENER_STOP_TIMEOUT_S)

    def _revoke(self) -> None:
        if self._info is not None:
            self._info = None
            self._new_generation()

    def _new_generation(self) -> None:
        self.generation += 1
        self._on_new_generation()

    def _stop_in_background(self) -> None:
        # The request that spent the budget may be running on the share listener
        # itself; stopping it inline would wait on that very request.
        async def stop() -> None:
            async with self._lock:
                if self._info is None and self._listener is not None:
                    await self._listener.stop()

        task = asyncio.get_running_loop().create_task(stop(), name="lan-share-stop")
        self._stop_tasks.add(task)
        task.add_done_callback(self._stop_tasks.discard)
