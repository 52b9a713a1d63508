"""LAN sharing: a second listener on the LAN, guarded by a fresh 6-digit PIN.

The PIN lives in the auth store (this process's memory, or Redis shared by
replicas; never on disk), sealed (auth/pin_seal.py): the store holds a keyed
hash to check it and a copy only the PIN key opens, never the PIN in clear.
Every enable draws a new one (and a new generation
number, which sessions minted from a PIN are bound to), so turning sharing off
or on again kills every PIN credential in circulation. After
``failure_budget`` failed PIN attempts in total, from any number of clients
(on any replica), the PIN is revoked: guessing one of 10^6 values with 100
tries has a 1-in-10^4 chance at most. The listener itself belongs to the
process that was asked to share; the fingerprint of the TLS certificate it
serves is kept with the PIN record, so every replica shows the same https link.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .pin_seal import PinSeal
from .store import AuthStore, SharedPin

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

    @property
    def tls_fingerprint(self) -> str | None:
        """The SHA-256 fingerprint of the TLS certificate served while running; None
        for a plain-HTTP listener."""
        ...

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
    fingerprint: str = ""  # of the listener's TLS certificate; "" for plain HTTP

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.fingerprint else "http"
        return f"{scheme}://{host}:{self.port}/?pin={self.pin}"


def new_pin() -> str:
    return "".join(secrets.choice("0123456789") for _ in range(PIN_DIGITS))


class LanShare:
    """The PIN (in the store) and this process's listener, enabled and disabled together."""

    def __init__(self, store: AuthStore, listener: ShareListener | None, failure_budget: int,
                 on_new_generation: Callable[[], Awaitable[None]], seal: PinSeal) -> None:
        self._store = store
        self._seal = seal
        self._listener = listener
        self._budget = failure_budget
        self._on_new_generation = on_new_generation
        self._lock = asyncio.Lock()
        self._stop_tasks: set[asyncio.Task[None]] = set()
        self._listening_host: str | None = None

    @property
    def listening_host(self) -> str | None:
        """The LAN address this process's listener serves, while it runs. Known
        without the store: the Host allow-list checks it on every request."""
        if self._listener is None or not self._listener.running:
            return None
        return self._listening_host

    async def current(self) -> ShareInfo | None:
        """The live PIN and where it was shared, or None."""
        shared = await self._live()
        if shared is None:
            return None
        pin = self._seal.open(shared.sealed)
        return ShareInfo(pin, shared.host, shared.port, shared.fingerprint) if pin is not None else None

    async def generation(self) -> int:
        return await self._store.share_generation()

    async def enable(self, app: Any) -> ShareInfo:
        """Start the listener (if needed) and draw a new PIN."""
        if self._listener is None:
            raise ShareUnavailable("LAN sharing is not available in this deployment")
        async with self._lock:
            try:
                host, port = await self._listener.start(app)
            except OSError as exc:
                raise ShareUnavailable(f"LAN sharing could not start its listener: {exc.strerror or exc}") from None
            self._listening_host = host
            pin = new_pin()
            fingerprint = self._listener.tls_fingerprint or ""
            shared = await self._store.open_share(self._seal.seal(pin), host, port, fingerprint)
            await self._on_new_generation()
            return ShareInfo(pin, shared.host, shared.port, shared.fingerprint)

    async def disable(self, *, wait: bool = True) -> None:
        """Revoke the PIN at once and stop the listener. ``wait=False`` stops it in
        the background: a request served by the listener itself must not wait for
        the listener to finish serving it."""
        if not wait:
            await self._revoke()
            self._stop_in_background()
            return
        async with self._lock:
            await self._revoke()
            if self._listener is not None:
                await self._listener.stop()

    async def check(self, presented: str) -> bool:
        """Constant-time PIN check. A failure spends the budget; the last one
        revokes the PIN and stops the listener in the background."""
        shared = await self._live()
        if shared is None:
            return False
        if self._seal.matches(shared.sealed, presented):
            return True
        if await self._store.pin_failure(shared.generation) >= self._budget:
            if await self._store.close_share(if_generation=shared.generation):
                await self._on_new_generation()
            self._stop_in_background()
        return False

    async def _live(self) -> SharedPin | None:
        """The live PIN's record, if this process's PIN key sealed it. One sealed with
        another key (a replica with another API key) is no PIN here: it can be neither
        checked nor shown, and failures must not spend its budget."""
        shared = await self._store.current_share()
        return shared if shared is not None and self._seal.owns(shared.sealed) else None

    async def aclose(self) -> None:
        """Stop this process's listener; with a shared store the PIN outlives one replica."""
        if not self._store.shared:
            await self.disable()
        elif self._listener is not None:
            async with self._lock:
                await self._listener.stop()
        await self.wait_stopped()

    async def wait_stopped(self) -> None:
        """Wait for listener stops running in the background (each bounded)."""
        for task in list(self._stop_tasks):
            with contextlib.suppress(asyncio.TimeoutError):  # wait_for has cancelled it; shutdown goes on
                await asyncio.wait_for(task, LISTENER_STOP_TIMEOUT_S)

    async def _revoke(self) -> None:
        if await self._store.close_share():
            await self._on_new_generation()

    def _stop_in_background(self) -> None:
        # The request that spent the budget may be running on the share listener
        # itself; stopping it inline would wait on that very request.
        async def stop() -> None:
            async with self._lock:
                if await self._live() is None and self._listener is not None:
                    await self._listener.stop()

        task = asyncio.get_running_loop().create_task(stop(), name="lan-share-stop")
        self._stop_tasks.add(task)
        task.add_done_callback(self._stop_tasks.discard)
