"""ASR sidecar faults: the errors a client is told when ASR is not available,
and audio that crashes every process it is replayed into (a hung process is
the watchdog's, gateway/dictation/watchdog.py).

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

from collections.abc import Sequence
from typing import Protocol, TypeVar

from engines.base import EngineState, EngineStatus
from gateway.engine_notice import ASR_ENGINE, engine_unavailable
from gateway.errors import GatewayError, Unavailable

MAX_CRASHES = 2


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
    """The error for an ASR service that is not ready: its state, never its detail
    or hint when it is missing or failed (they name server paths and commands,
    gateway/engine_notice.py)."""
    if status.state is EngineState.LOADING:
        return Unavailable(f"the ASR sidecar is starting ({status.detail}); try again shortly",
                           code="asr_unavailable", retry_after_s=2)
    return engine_unavailable(ASR_ENGINE, status.state)


def disabled_error() -> Unavailable:
    return Unavailable("Speech recognition is not enabled on this gateway")
