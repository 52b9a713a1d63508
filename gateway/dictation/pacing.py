"""Pacing a dictation stream to real time.

A client may send audio faster than it was spoken (a recorded file, a buffered
reconnect), and the sidecar would take all of it: its backlog would grow
without bound and starve other streams' finals. ``Pacer`` lets a stream run at
most ``max_ahead_s`` ahead of real time; past that the session stops reading
its socket until real time catches up, so TCP pushes back on the client and
nothing is dropped. A live microphone never gets near the limit.

Runs on the event loop; one per session.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

monotonic = time.monotonic


async def pause(delay_s: float, until: asyncio.Future[Any]) -> None:
    """Wait ``delay_s``, or less if ``until`` finishes first (the session is ending)."""
    await asyncio.wait({until}, timeout=delay_s)


class Pacer:
    def __init__(self, max_ahead_s: float) -> None:
        self.max_ahead_s = max_ahead_s
        self._played_until: float | None = None  # when the audio received so far would finish playing

    @property
    def ahead_s(self) -> float:
        """How far the stream is ahead of real time now."""
        if self._played_until is None:
            return 0.0
        return max(0.0, self._played_until - monotonic())

    def add(self, audio_s: float) -> float:
        """Count ``audio_s`` more seconds received; the seconds to wait before reading more."""
        now = monotonic()
        start = now if self._played_until is None else max(self._played_until, now)
        self._played_until = start + audio_s
        return max(0.0, self._played_until - now - self.max_ahead_s)

    async def hold(self, audio_s: float, until: asyncio.Future[Any]) -> None:
        """Count ``audio_s`` and wait as long as the stream is too far ahead."""
        delay = self.add(audio_s)
        if delay > 0:
            await pause(delay, until)
