"""Ending a session's tasks for sure.

``asyncio.wait_for`` before Python 3.12 can lose a cancellation that arrives
just as the operation it waits on completes: the task goes on as if never
cancelled. A session that cancels its tasks once and then drops them would
leave such a task waiting forever (and garbage-collected while pending).
``cancel_and_wait`` cancels again every task that is still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

RECANCEL_EVERY_S = 0.2


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], timeout_s: float) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait until they end, cancelling the stragglers again
    every 0.2 s; the tasks still running after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    pending = {task for task in tasks if not task.done()}
    while pending:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_EVERY_S, remaining))
    return pending
