"""How long the decoder has been busy, for the gateway's watchdog.

``BusyClock`` wraps the decoder: every method call made from a decode thread
is timed while it runs. The main thread reads ``oldest_s`` (the age of the
longest-running call) into its periodic ``lag`` event as ``busy_s``, so the
gateway can tell a decode that hangs from one that is merely slow, and
restart the process. Thread-safe: decode threads write, the main thread reads.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any


class BusyClock:
    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder
        self._lock = threading.Lock()
        self._running: dict[int, float] = {}  # thread id -> when its current call began

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._decoder, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        def timed(*args: Any, **kwargs: Any) -> Any:
            me = threading.get_ident()
            with self._lock:
                outer = me in self._running
                if not outer:
                    self._running[me] = time.monotonic()
            try:
                return value(*args, **kwargs)
            finally:
                if not outer:
                    with self._lock:
                        self._running.pop(me, None)

        return timed

    def oldest_s(self, now: float | None = None) -> float:
        """Seconds the longest-running decoder call has run (0 when idle)."""
        with self._lock:
            starts = list(self._running.values())
        if not starts:
            return 0.0
        return max(0.0, (time.monotonic() if now is None else now) - min(starts))
