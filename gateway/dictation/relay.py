"""The sending side of a dictation session (gateway/dictation/session.py): its
``Outbox`` (every event through one lock, one close), the task that relays the
ASR stream's events to the client, and the ``Drain`` that decides when a
stopping server stops reading.

The relay ends the session when the stream does: after ``closed`` (close
1000), when the stream was dropped (its error, then the error's close code),
when the drain's own finalize is answered (1001), when the client reads nothing
(4408, or 1011 once a final could not even be queued).

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable

from engines.base import AsrStreamHandle
from gateway.dictation.transport import DictationTransport
from gateway.errors import GatewayError, close_code_for
from gateway.protocol.common import Closed, ErrorEvent
from gateway.protocol.dictation import Final, Finalized, ServerEvent, SpeechStarted

GOING_AWAY_REASON = "server stopping; every final is sent; retry on a new connection"
POLL_S = 1.0  # how often a relay with nothing to send checks that the client still reads


class Outbox:
    """Events to the client, one at a time, each within ``timeout_s``; the socket closed once."""

    def __init__(self, transport: DictationTransport, timeout_s: float) -> None:
        self.transport = transport
        self.timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._closed = False

    async def send(self, event: ServerEvent) -> None:
        async with self._lock:
            await self.transport.send_event(event, self.timeout_s)

    async def close(self, code: int, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        await self.transport.close(code, reason)

    async def refuse(self, error: GatewayError) -> None:
        """Tell the client why (an ``error`` event) and close with the error's code."""
        with contextlib.suppress(Exception):  # the client left first: the close is a no-op then
            await self.send(ErrorEvent.of(error))
        await self.close(error.close_code, error.message)


class Drain:
    """A stopping server stops a session's reading once no utterance is open
    (every ``speech_started`` has its ``final``), or at once."""

    def __init__(self) -> None:
        self.draining = False
        self.stop_reading = asyncio.Event()
        self.mark = f"drain-{secrets.token_hex(8)}"  # its finalize's id; never relayed: the client did not ask
        self._open: set[int] = set()  # speech_started sent, final not yet

    def begin(self, now: bool) -> None:
        self.draining = True
        if now or not self._open:
            self.stop_reading.set()

    def sent(self, event: ServerEvent) -> None:
        if isinstance(event, SpeechStarted):
            self._open.add(event.utterance)
        elif isinstance(event, Final):
            self._open.discard(event.utterance)
            if self.draining and not self._open:
                self.stop_reading.set()


async def relay_events(stream: AsrStreamHandle, out: Outbox, drain: Drain,
                       release_slot: Callable[[], None] | None = None) -> None:
    """Send the stream's events until the session ends (the close is done here).
    ``release_slot`` frees the session's capacity slot before ``closed`` goes
    out, so a client that opens its next stream on ``closed`` finds it free."""
    while True:
        if stream.overflowed:
            await out.close(close_code_for("events_overflowed"), "the client is not reading transcript events")
            return
        try:
            item: ServerEvent = await asyncio.wait_for(stream.events.get(), POLL_S)
        except asyncio.TimeoutError:
            continue
        if isinstance(item, Finalized) and item.id == drain.mark:
            await out.close(close_code_for("going_away"), GOING_AWAY_REASON)
            return
        if isinstance(item, ErrorEvent) and item.close_code is not None:  # the stream was dropped
            with contextlib.suppress(Exception):
                await out.send(item)
            await out.close(item.close_code, item.message)
            return
        if isinstance(item, Closed) and release_slot is not None:
            release_slot()
        try:
            await out.send(item)
        except asyncio.TimeoutError:
            await out.close(close_code_for("idle_timeout"), f"the client did not read for {out.timeout_s:.0f} s")
            return
        drain.sent(item)
        if isinstance(item, Closed):
            await out.close(close_code_for("normal_end"))
            return
