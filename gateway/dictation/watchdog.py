"""The ASR sidecar's watchdog: tells a sidecar that is idle from one that is hung.

The watchdog hears every frame the sidecar sends. Two things make a process
hung, and the supervisor kills it (and restarts it like any lost process):

- a decode that runs too long: the sidecar's once-a-second ``lag`` event,
  sent while it has streams or a decode running, carries ``busy_s``, how long
  its running decode has taken; past ``decode_timeout_s`` it is hung, even
  though the sidecar still talks;
- silence: a sidecar with nothing to report sends nothing, so once it has been
  quiet for ``ping_after_s`` the watchdog sends it a ``ping`` (again every
  ``ping_after_s`` while it stays quiet), which its main loop answers with
  ``pong``. One that sends nothing at all for ``silence_timeout_s``, pings
  unanswered, is hung, whether it has work or not. An idle sidecar answers, so
  an idle period of any length is never taken for a hang, and a hung idle one
  is replaced before the next request needs it.

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from gateway.dictation.pipe import Lag, SidecarEvent

log = logging.getLogger("voxgate.asr")

DECODE_TIMEOUT_S = 120.0  # far beyond any one decode (a 30 s window, beam 5, on a busy CPU)
SILENCE_TIMEOUT_S = 60.0  # a live sidecar answers a ping in far less, even on a loaded host
PING_AFTER_S = 5.0
WATCH_TICK_S = 1.0


class Watchdog:
    def __init__(self, decode_timeout_s: float = DECODE_TIMEOUT_S, silence_timeout_s: float = SILENCE_TIMEOUT_S,
                 ping_after_s: float = PING_AFTER_S, tick_s: float = WATCH_TICK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < ping_after_s < silence_timeout_s:
            raise ValueError(f"ping_after_s ({ping_after_s}) must be above 0 and below silence_timeout_s "
                             f"({silence_timeout_s}), so a live sidecar is asked before it counts as hung")
        if not 0 < tick_s <= ping_after_s:
            raise ValueError(f"tick_s ({tick_s}) must be above 0 and at most ping_after_s ({ping_after_s})")
        self.decode_timeout_s = decode_timeout_s
        self.silence_timeout_s = silence_timeout_s
        self.ping_after_s = ping_after_s
        self.tick_s = tick_s
        self._clock = clock
        self.pings = 0  # sent over the watchdog's life, for the tests and the curious
        self.reset()

    def reset(self) -> None:
        """A new process: nothing heard yet, nothing busy, nothing asked."""
        self._heard_at = self._clock()
        self._pinged_at: float | None = None
        self._busy_since: float | None = None

    def heard(self, event: SidecarEvent | None) -> None:
        """The sidecar sent ``event`` (None: a frame that is no event the gateway knows)."""
        now = self._clock()
        self._heard_at = now
        self._pinged_at = None
        if isinstance(event, Lag):
            busy = event.busy_s
            self._busy_since = now - busy if busy is not None and busy > 0 else None

    def ping_due(self) -> bool:
        """Whether the sidecar has been quiet long enough to be asked if it is alive
        (True at most once per ``ping_after_s``; the caller sends the ping)."""
        now = self._clock()
        last = max(self._heard_at, self._pinged_at if self._pinged_at is not None else self._heard_at)
        if now - last < self.ping_after_s:
            return False
        self._pinged_at = now
        self.pings += 1
        return True

    def verdict(self) -> str | None:
        """Why the process must be restarted now, or None."""
        now = self._clock()
        if self._busy_since is not None and now - self._busy_since > self.decode_timeout_s:
            return f"a decode has run for {now - self._busy_since:.0f} s"
        if now - self._heard_at > self.silence_timeout_s:
            return f"the ASR sidecar sent nothing for {now - self._heard_at:.0f} s and answered no ping"
        return None

    async def guard(self, proc: asyncio.subprocess.Process, ping: Callable[[], Awaitable[None]]) -> None:
        """Kill ``proc`` once it is hung, pinging it when it is quiet; its reader then
        sees it end and it is restarted."""
        while proc.returncode is None:
            await asyncio.sleep(self.tick_s)
            reason = self.verdict()
            if reason is not None:
                log.error("%s; restarting the ASR sidecar", reason)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                return
            if self.ping_due():
                await ping()

    @contextlib.asynccontextmanager
    async def watching(self, proc: asyncio.subprocess.Process,
                       ping: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
        """Guard ``proc`` for as long as the body runs (the guard is a task owned here).
        The silence is counted from here, when its frames begin to be read: what it
        sent before (while its streams were replayed into it) is still in the pipe."""
        self.reset()
        task = asyncio.create_task(self.guard(proc, ping), name="asr-watchdog")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
