"""One dictation stream as the gateway sees it: audio out to the ASR sidecar,
protocol events in.

``AsrStream`` logs what it sends in its ``Retention`` (so a restarted sidecar
can be given the open utterances again) and filters the sidecar's events
through it, so the client-facing invariants hold across a restart: one
``speech_started`` per utterance, ``stable`` only grows, one ``final`` per
utterance, in order, never a partial after it; a ``final`` matches the
``eager_final`` before it unless a ``turn_resumed`` came between.

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import numpy as np

from engines.asr.framing import encode_frame, pcm_to_bytes
from gateway.dictation.retention import FinalizeEntry, Retention
from gateway.errors import GatewayError
from gateway.protocol.common import Closed
from gateway.protocol.dictation import Discarded, EagerFinal, Final, Finalized, Partial, SpeechStarted, TurnResumed

if TYPE_CHECKING:
    from gateway.dictation.sidecar import AsrSupervisor

RATE = 16000
EVENT_QUEUE_SIZE = 512


def asr_unavailable_event(message: str) -> dict[str, Any]:
    return GatewayError(message, code="asr_unavailable").to_event()


def finalize_header(stream_id: str, mark: str | None) -> dict[str, Any]:
    header: dict[str, Any] = {"op": "finalize", "stream": stream_id}
    if mark is not None:
        header["id"] = mark
    return header


class AsrStream:
    """One dictation stream as the gateway sees it: audio out, protocol events in.

    ``events`` holds protocol events (dataclasses from gateway.protocol.dictation,
    or error-event dicts). ``retention`` is what a restarted sidecar is given.
    """

    def __init__(self, supervisor: AsrSupervisor, stream_id: str, options: dict[str, Any]) -> None:
        self.supervisor = supervisor
        self.id = stream_id
        self.options = options  # language (None = auto), interim, word_timestamps, silence_ms, eager
        self.events: asyncio.Queue[Any] = asyncio.Queue(maxsize=EVENT_QUEUE_SIZE)
        self.retention = Retention()
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
            await self.supervisor.write({"op": "audio", "stream": self.id}, pcm_to_bytes(samples))

    async def finalize(self, mark: str | None = None) -> None:
        """Close the open utterance; a ``mark`` is answered by a ``Finalized`` event."""
        self.retention.add_finalize(mark)
        if self.live:
            await self.supervisor.write(finalize_header(self.id, mark))

    async def end(self) -> None:
        self.ending = True
        if self.live:
            await self.supervisor.write({"op": "end", "stream": self.id})

    async def close(self) -> None:
        self.supervisor.forget(self)
        if self.live and not self.ended:  # after ``ended`` the sidecar has dropped the stream itself
            with contextlib.suppress(Exception):
                await self.supervisor.write({"op": "close", "stream": self.id})
        self.live = False

    @property
    def audio_s(self) -> float:
        return self.retention.pos / RATE

    # ---- replay

    def open_header(self) -> dict[str, Any]:
        return {"op": "open", "stream": self.id, **self.options, **self.retention.resume_fields()}

    def replay_frames(self, start: int) -> tuple[list[bytes], int]:
        """Frames for the logged entries from index ``start`` on, and the next index."""
        entries = self.retention.entries(start)
        frames = [encode_frame(finalize_header(self.id, entry.mark)) if isinstance(entry, FinalizeEntry)
                  else encode_frame({"op": "audio", "stream": self.id}, pcm_to_bytes(entry)) for entry in entries]
        return frames, start + len(entries)

    @property
    def in_utterance(self) -> bool:
        return self.retention.in_utterance

    # ---- events from the sidecar

    def deliver(self, event: dict[str, Any]) -> None:
        withdrawn = self.retention.withdrawn_eager(event)
        if withdrawn is not None:
            self.deliver(withdrawn)
        if event.get("ev") in ("final", "discarded"):
            self.crashes = 0  # its audio was decoded: a later crash is not this audio's doing
        if not self.retention.accept(event):
            return
        kind = event.get("ev")
        if kind == "speech_started":
            self._put(SpeechStarted(event["utterance"], event["at"]))
        elif kind == "partial":
            self.lag_s = float(event.get("lag_s", self.lag_s))
            self._put(Partial(event["utterance"], event["text"], event["stable"], event["start"], event["end"],
                              self.lag_s))
        elif kind == "eager_final":
            self._put(EagerFinal(event["utterance"], event["text"], event["start"], event["end"],
                                 event.get("language", ""), event.get("words")), essential=True)
        elif kind == "turn_resumed":
            self._put(TurnResumed(event["utterance"], event["at"]), essential=True)
        elif kind == "final":
            self.finals += 1
            self.lag_s = float(event.get("lag_s", self.lag_s))
            self._put(Final(event["utterance"], event["text"], event["start"], event["end"],
                            event.get("language", ""), event.get("words")), essential=True)
        elif kind == "discarded":
            self._put(Discarded(int(event["utterance"])))
        elif kind == "finalized":
            utterance = event.get("utterance")
            self._put(Finalized(str(event.get("id")), int(utterance) if utterance is not None else None),
                      essential=True)
        elif kind == "ended":
            self.ended = True
            self._put(Closed(self.finals, round(self.audio_s, 3)), essential=True)
        elif kind == "error":
            self._put(GatewayError(event.get("message", ""), code=event.get("code", "asr_failed")).to_event())

    def report(self, event: dict[str, Any]) -> None:
        """Queue an error event for the client (the supervisor's own news)."""
        self._put(event)

    def fail(self, error: GatewayError) -> None:
        """End the stream with ``error``: the session sends its event and closes."""
        self.live = False
        self._put(error, essential=True)

    def _put(self, item: Any, essential: bool = False) -> None:
        try:
            self.events.put_nowait(item)
        except asyncio.QueueFull:
            if essential:  # a client that reads nothing loses its session, never a final silently
                self.overflowed = True
