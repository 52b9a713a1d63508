"""One dictation stream as the gateway sees it: audio out to the ASR sidecar,
typed protocol events in.

``AsrStream`` logs what it sends in its ``Retention`` (so a restarted sidecar
can be given the open utterances again) and passes the sidecar's events
through its ``EventFilter``, so the client-facing invariants hold across a
restart (gateway/dictation/event_filter.py). Its frames go out through its
owner (the supervisor), which it knows only as a ``StreamOwner``.

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import numpy as np

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from engines.asr.framing import pcm_to_bytes
from gateway.dictation.event_filter import EventFilter
from gateway.dictation.pipe import Ended, StreamItem, audio_op, close_op, configure_op, end_op, finalize_op
from gateway.dictation.retention import Retention
from gateway.errors import GatewayError
from gateway.protocol.common import Closed, ErrorEvent
from gateway.protocol.dictation import (
    Discarded,
    EagerFinal,
    Final,
    Finalized,
    Partial,
    ServerEvent,
    TurnResumed,
)

EVENT_QUEUE_SIZE = 512
ESSENTIAL = (EagerFinal, TurnResumed, Final, Finalized)  # never dropped: a client that loses one is told


class StreamOwner(Protocol):
    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        """One frame to the sidecar process (dropped while there is none: the replay sends it)."""
        ...

    def forget(self, stream: AsrStream) -> None: ...


class AsrStream:
    """One dictation stream as the gateway sees it: audio out, protocol events in.

    ``events`` holds the events for the client (gateway/protocol/dictation.py's
    ``ServerEvent``). ``retention`` is what a restarted sidecar is given.
    """

    def __init__(self, owner: StreamOwner, stream_id: str, options: dict[str, Any]) -> None:
        self.owner = owner
        self.id = stream_id
        self.options = options  # language (None = auto), interim, word_timestamps, silence_ms, eager, prompt
        self.events: asyncio.Queue[ServerEvent] = asyncio.Queue(maxsize=EVENT_QUEUE_SIZE)
        self.filter = EventFilter()
        self.retention = Retention(self.filter)
        self.live = False  # the current process has this stream, with every logged entry replayed
        self.overflowed = False  # a final could not be queued: the client reads nothing
        self.lag_s = 0.0
        self.finals = 0
        self.ending = False
        self.ended = False
        self.crashes = 0  # lost processes charged to this stream (gateway/dictation/faults.py)

    # ---- client side

    async def send_audio(self, samples: np.ndarray) -> None:
        if len(samples) == 0:
            return
        self.retention.add_audio(samples)
        if self.live:
            await self.owner.write(audio_op(self.id), pcm_to_bytes(samples))

    async def finalize(self, mark: str | None = None) -> None:
        """Close the open utterance; a ``mark`` is answered by a ``Finalized`` event."""
        self.retention.add_finalize(mark)
        if self.live:
            await self.owner.write(finalize_op(self.id, mark))

    async def configure(self, prompt: str | None, reset_context: bool = False,
                        terms: tuple[str, ...] = ()) -> None:
        """Decode with ``prompt`` and write finals with ``terms`` (None: the prompt and terms it
        has) from now on; a restarted sidecar is given the latest ones."""
        if prompt is None:
            prompt, terms = str(self.options.get("prompt", "")), tuple(self.options.get("terms", ()))
        self.options = {**self.options, "prompt": prompt, "terms": list(terms)}
        if self.live:
            await self.owner.write(configure_op(self.id, prompt, reset_context, terms))

    async def end(self) -> None:
        self.ending = True
        if self.live:
            await self.owner.write(end_op(self.id))

    async def close(self) -> None:
        self.owner.forget(self)
        if self.live and not self.ended:  # after ``ended`` the sidecar has dropped the stream itself
            with contextlib.suppress(Exception):
                await self.owner.write(close_op(self.id))
        self.live = False

    @property
    def audio_s(self) -> float:
        return self.retention.pos / ASR_RATE

    @property
    def in_utterance(self) -> bool:
        return self.filter.in_utterance

    # ---- events from the sidecar

    def deliver(self, event: StreamItem) -> None:
        withdrawn = self.filter.withdrawn_eager(event)
        if withdrawn is not None:
            self.deliver(withdrawn)
        if isinstance(event, Final | Discarded):
            self.crashes = 0  # its audio was decoded: a later crash is not this audio's doing
        if not self.filter.accept(event):
            return
        if isinstance(event, Finalized | Final | Discarded):
            self.retention.trim()  # the log may hold less now
        if isinstance(event, Partial | Final):
            self.lag_s = event.lag_s
        if isinstance(event, Final):
            self.finals += 1
        if isinstance(event, Ended):
            self.ended = True
            self._put(Closed(self.finals, round(self.audio_s, 3)), essential=True)
        else:
            self._put(event, essential=isinstance(event, ESSENTIAL))

    def report(self, event: ErrorEvent) -> None:
        """Queue an error event for the client (the supervisor's own news)."""
        self._put(event)

    def fail(self, error: GatewayError) -> None:
        """End the stream with ``error``: the session sends its event and closes."""
        self.live = False
        self._put(ErrorEvent.of(error, closes=True), essential=True)

    def _put(self, item: ServerEvent, essential: bool = False) -> None:
        try:
            self.events.put_nowait(item)
        except asyncio.QueueFull:
            if essential:  # a client that reads nothing loses its session, never a final silently
                self.overflowed = True
