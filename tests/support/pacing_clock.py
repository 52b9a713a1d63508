"""A stand-in for the dictation pacer's clock and pause (``gateway.dictation.pacing``),
so no pacing test waits on time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.dictation import pacing

RELEASE_WAIT_S = 10.0  # how long a held pause waits for the test to release it


class PacingClock:
    """The pacer's clock and pause: a pause is recorded and moves the clock by its
    length. A ``held`` clock ends each pause only when the test releases it
    (``released.release()``), or at once from when the test sets ``free``."""

    def __init__(self, *, held: bool = False) -> None:
        self.now = 100.0
        self.pauses: list[float] = []
        self.released = asyncio.Semaphore(0)
        self.free = not held

    def monotonic(self) -> float:
        return self.now

    async def pause(self, delay_s: float, until: asyncio.Future[Any]) -> None:
        self.pauses.append(round(delay_s, 6))
        if not self.free:
            await asyncio.wait_for(self.released.acquire(), RELEASE_WAIT_S)
        self.now += delay_s


def install(monkeypatch: pytest.MonkeyPatch, clock: PacingClock) -> PacingClock:
    """Make ``clock`` the pacer's, for this test."""
    monkeypatch.setattr(pacing, "monotonic", clock.monotonic)
    monkeypatch.setattr(pacing, "pause", clock.pause)
    return clock
