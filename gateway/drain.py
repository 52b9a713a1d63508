"""Graceful drain before a stop: SIGTERM ends a replica without losing work.

On the first SIGTERM (or SIGINT) the server does not stop listening. It drains:

1. ``/health/ready`` (and ``/health``) answer 503 ``draining``, so a load balancer
   or Kubernetes stops sending it new sessions, and new sessions that still
   arrive are refused at once (sockets close 1013, HTTP gets 503 + Retry-After,
   code ``draining``): the client retries and lands on another replica;
2. every live session finishes the work it has taken: a dictation stream keeps
   transcribing until its open utterance has its final, a TTS session speaks
   what was queued; then each closes 1001 (``going_away``, the reason says to
   retry);
3. at ``drain_s`` the sessions still open are told to stop now (a dictation
   stream finalizes what it has read and gets that final out first), and after
   a short grace the server stops as uvicorn always does.

A second signal during the drain stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import FrameType
from typing import Any

import uvicorn

from gateway.registry import SessionRegistry

log = logging.getLogger("voxgate")

STATE_KEY = "drain"
# After the deadline, how long stopped sessions get to send their last final and close.
STOP_GRACE_S = 10.0


class Drainer:
    """The drain of one app, owned by its lifespan (``state["drain"]``)."""

    def __init__(self, sessions: SessionRegistry, drain_s: float, stop_grace_s: float = STOP_GRACE_S) -> None:
        self.sessions = sessions
        self.drain_s = drain_s
        self.stop_grace_s = stop_grace_s

    @property
    def draining(self) -> bool:
        return self.sessions.draining

    async def run(self) -> bool:
        """Drain; True when every session ended on its own before the deadline."""
        live = len(self.sessions)
        log.info("draining: %d live session(s), up to %g s; new sessions are refused", live, self.drain_s)
        self.sessions.begin_drain()
        if await self.sessions.wait_empty(self.drain_s):
            log.info("drained: every session finished its work")
            return True
        log.warning("drain deadline: stopping %d session(s) now", len(self.sessions))
        self.sessions.stop_all()
        if not await self.sessions.wait_empty(self.stop_grace_s):
            log.warning("%d session(s) still open after the drain; the server closes them", len(self.sessions))
        return False


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with a drain between the first stop signal and the stop.

    The app's lifespan state must hold a ``Drainer`` under ``"drain"``; without
    one (or before start-up is complete) a signal stops the server as usual.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task[None] | None = None
        self._drain_requested = False

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await super().serve(sockets)
        finally:
            if self._drain_task is not None and not self._drain_task.done():
                self._drain_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._drain_task

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Runs in a signal handler: only hand the work to the event loop.
        drainer = self._drainer()
        if drainer is None or self._drain_requested or self.should_exit or self._loop is None:
            super().handle_exit(sig, frame)
            return
        self._drain_requested = True
        self._captured_signals.append(sig)  # re-raised after the stop, as uvicorn does
        self._loop.call_soon_threadsafe(self._start_drain, drainer)

    def _drainer(self) -> Drainer | None:
        if not self.started:
            return None
        drainer = getattr(getattr(self, "lifespan", None), "state", {}).get(STATE_KEY)
        return drainer if isinstance(drainer, Drainer) else None

    def _start_drain(self, drainer: Drainer) -> None:
        if not self.should_exit:
            self._drain_task = asyncio.get_running_loop().create_task(self._drain(drainer), name="drain")

    async def _drain(self, drainer: Drainer) -> None:
        try:
            await drainer.run()
        except Exception:  # a failed drain must still stop the server
            log.exception("drain failed")
        finally:
            self.should_exit = True
