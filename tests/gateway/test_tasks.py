"""cancel_and_wait ends a task that lost its first cancellation (asyncio.wait_for
before Python 3.12 can swallow one), which a single cancel leaves running."""

from __future__ import annotations

import asyncio
import contextlib

from gateway.tasks import cancel_and_wait


async def _loses_its_first_cancellation(parked: asyncio.Event) -> None:
    with contextlib.suppress(asyncio.CancelledError):  # what wait_for's race does: the cancellation is gone
        await asyncio.sleep(3600)
    parked.set()
    await asyncio.Event().wait()  # a session loop back at its idle wait


async def test_a_task_that_lost_a_cancellation_is_cancelled_again() -> None:
    parked = asyncio.Event()
    task = asyncio.create_task(_loses_its_first_cancellation(parked))
    await asyncio.sleep(0)
    assert await cancel_and_wait({task}, timeout_s=5.0) == set()
    assert parked.is_set() and task.cancelled()


async def test_a_task_that_will_not_end_is_returned_after_the_timeout() -> None:
    refusing = True

    async def stubborn() -> None:
        while refusing:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    assert await cancel_and_wait({task}, timeout_s=0.5) == {task}
    refusing = False
    task.cancel()
    await asyncio.wait({task})
