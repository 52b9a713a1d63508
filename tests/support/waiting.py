"""Waiting for a state another thread, task or process brings about.

A test asserts a state once it holds, never at an instant it merely hopes it
holds (a CPU hog on the host can hold the other side back for a second or
more). The deadline is not a speed bar: it only turns a state that never comes
into a failure that names it instead of a hung run, so it is generous.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE_S = 60.0
POLL_S = 0.01


def wait_until(predicate: Callable[[], object], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``predicate`` (blocking this thread) until it holds; fail naming ``what``."""
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"never happened within {deadline_s:g} s: {what}")
        time.sleep(POLL_S)


async def eventually(predicate: Callable[[], object], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``predicate`` (yielding to the event loop) until it holds; fail naming ``what``."""
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"never happened within {deadline_s:g} s: {what}")
        await asyncio.sleep(POLL_S)
