"""A LAN-share listener that records calls instead of opening a socket."""

from __future__ import annotations

from typing import Any


class FakeListener:
    """``auth.ShareListener`` with no socket: ``start`` records the app and
    answers a fixed LAN address, or raises ``fail_with``."""

    def __init__(self, fail_with: OSError | None = None) -> None:
        self.running = False
        self.starts = 0
        self.stops = 0
        self.app: Any = None
        self.fail_with = fail_with
        self.tls_fingerprint: str | None = None

    async def start(self, app: Any) -> tuple[str, int]:
        if self.fail_with is not None:
            raise self.fail_with
        self.app = app
        self.running = True
        self.starts += 1
        return ("192.0.2.10", 8001)

    async def stop(self) -> None:
        if self.running:
            self.stops += 1
        self.running = False
