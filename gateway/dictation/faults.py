"""ASR sidecar faults: the errors a client is told when ASR is not available,
and what the supervisor acts on, a hung process and audio that crashes every
process it is replayed into.

``Watchdog`` hears every frame the sidecar sends. The sidecar's once-a-second
``lag`` event carries ``busy_s``, how long its running decode has taken; a
decode older than ``decode_timeout_s``, or a sidecar that sends nothing for
``silence_timeout_s`` while it has streams or requests, is hung, and the
supervisor kills it (and restarts it like any lost process).

``blame`` decides which streams a lost process counts against. A process that
dies soon after it started (``HEALTHY_AFTER_S``) is in a crash loop caused by
what was replayed into it: each stream it held is charged one crash, or only
those with an utterance in progress when some have one (a decode is what
usually fails, and silence is never decoded). A stream charged ``MAX_CRASHES``
times is dropped with ``asr_failed`` instead of being replayed again; a final
(its replayed audio decoded after all) or a process that lived long clears
the charges.

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from engines.base import EngineState, EngineStatus
from gateway.errors import GatewayError, Unavailable

log = logging.getLogger("voxgate.asr")

MAX_CRASHES = 2
DECODE_TIMEOUT_S = 120.0  # far beyond any one decode (a 30 s window, beam 5, on a busy CPU)
SILENCE_TIMEOUT_S = 60.0  # the sidecar reports at least once a second while it has work
WATCH_TICK_S = 1.0


class Watchdog:
    def __init__(self, decode_timeout_s: float = DECODE_TIMEOUT_S, silence_timeout_s: float = SILENCE_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.decode_timeout_s = decode_timeout_s
        self.silence_timeout_s = silence_timeout_s
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        """A new process: nothing heard yet, nothing busy."""
        self._heard_at = self._clock()
        self._busy_since: float | None = None

    def heard(self, event: dict[str, Any]) -> None:
        now = self._clock()
        self._heard_at = now
        if event.get("ev") == "lag":
            busy = event.get("busy_s")
            if isinstance(busy, int | float) and not isinstance(busy, bool) and busy > 0:
                self._busy_since = now - float(busy)
            else:
                self._busy_since = None

    def verdict(self, has_work: bool) -> str | None:
        """Why the process must be restarted now, or None."""
        now = self._clock()
        if self._busy_since is not None and now - self._busy_since > self.decode_timeout_s:
            return f"a decode has run for {now - self._busy_since:.0f} s"
        if has_work and now - self._heard_at > self.silence_timeout_s:
            return f"the ASR sidecar sent nothing for {now - self._heard_at:.0f} s"
        return None


    async def guard(self, proc: asyncio.subprocess.Process, has_work: Callable[[], bool]) -> None:
        """Kill ``proc`` once it is hung; its reader then sees it end and it is restarted."""
        while proc.returncode is None:
            await asyncio.sleep(WATCH_TICK_S)
            reason = self.verdict(has_work())
            if reason is not None:
                log.error("%s; restarting the ASR sidecar", reason)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                return


class Chargeable(Protocol):
    crashes: int

    @property
    def in_utterance(self) -> bool: ...


C = TypeVar("C", bound=Chargeable)


def crash_error() -> GatewayError:
    """What a dropped stream is told."""
    return GatewayError(f"the ASR sidecar failed {MAX_CRASHES} times in a row while it held this stream's audio; "
                        "the stream was dropped so the others can go on", code="asr_failed")


def blame(held: Sequence[C], crash_loop: bool) -> list[C]:
    """Charge the streams a lost process held; the ones to drop now."""
    if not crash_loop:
        for stream in held:
            stream.crashes = 0
        return []
    speaking = [s for s in held if s.in_utterance]
    for stream in speaking or held:
        stream.crashes += 1
    return [s for s in held if s.crashes >= MAX_CRASHES]


def unavailable_error(status: EngineStatus) -> Unavailable:
    """The error for an ASR service that is not ready, with its reason and hint."""
    if status.state is EngineState.LOADING:
        return Unavailable(f"the ASR sidecar is starting ({status.detail}); try again shortly",
                           code="asr_unavailable", retry_after_s=2)
    message = status.detail + (f". {status.hint}" if status.hint else "")
    return Unavailable(message or "ASR is not available", code="engine_unavailable")


def disabled_error() -> Unavailable:
    return Unavailable("ASR is not enabled on this gateway; start it with --engines including asr")
