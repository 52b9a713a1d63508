"""One Wyoming transcription, ``audio-start`` to the answer, on the gateway's
shared ``DictationSession`` (gateway/dictation/session.py).

The session does what every dictation front shares: the ASR's readiness and
language check (a refusal is an ``error`` event), decoding and resampling
to 16 kHz off the loop, pacing to real time (``VOXGATE_DICTATION_MAX_AHEAD_S``
ahead at most; past it the connection reads no further event, so TCP pushes
back on the client), the idle and end timeouts, and the replay of the stream
on a sidecar restart. This module turns Wyoming audio into the session's input
(``PcmIn``: any rate, width and channel count to mono float32 at the stream's
rate) and owns the session's task; transcript.py turns its events into
Wyoming's transcript.

The stream counts against the dictation limits, the global one and the
client address's share (gateway/registry.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from engines.base import AsrService
from gateway.codecs.formats import InputEncoding
from gateway.config import Settings
from gateway.dictation.session import DictationSession
from gateway.errors import close_code_for
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.link import Link, PcmIn
from gateway.fronts.wyoming.messages import AudioFormat, Transcribe
from gateway.fronts.wyoming.transcript import TranscriptTransport
from gateway.protocol.common import End
from gateway.protocol.dictation import DictationParams
from gateway.registry import SessionEntry, SessionRegistry

DEFAULT_SILENCE_MS = 500
END_WAIT_S = 150.0  # after audio-stop: beyond the session's own wait for the last finals (120 s)
# the wire code of the session's close, for the error a later audio-stop gets
CLOSE_CODES = {close_code_for("idle_timeout"): "idle_timeout", close_code_for("too_large"): "too_large",
               close_code_for("bad_request"): "bad_audio"}


def session_language(language: str | None) -> str:
    """Wyoming's language (``en``, ``en-US``, ``en_US``, none) as the session's (``en``, ``auto``)."""
    if not language:
        return "auto"
    return language.split("-")[0].split("_")[0].lower()


class Transcription:
    """From ``audio-start`` to the answer; ``close()`` drops it at any point."""

    def __init__(self, link: Link, asr: AsrService | None, request: Transcribe, sessions: SessionRegistry,
                 settings: Settings, fmt: AudioFormat) -> None:
        self.link = link
        self.sessions = sessions
        self.rate = fmt.rate
        self.transport = TranscriptTransport(link, request.language, endpoint=request.endpoint_silence_ms is not None)
        params = DictationParams(sample_rate=fmt.rate, encoding=InputEncoding.PCM_F32LE,
                                 language=session_language(request.language), interim=True,
                                 silence_ms=request.endpoint_silence_ms or DEFAULT_SILENCE_MS,
                                 prompt=request.prompt, terms=request.terms)
        self.session = DictationSession(self.transport, params, settings, asr)
        self._pcm = PcmIn(fmt.rate)
        self._entry: SessionEntry | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def answered(self) -> bool:
        return self.transport.answered

    # ---- lifecycle

    def open(self) -> None:
        """Claim the stream's place (``OverCapacity`` / ``Draining`` when there is
        none) and start the session; its refusal, if any, is an ``error`` event."""
        self._entry = entry = self.sessions.claim("dictation", f"wyoming:{self.link.client}", self.describe,
                                                  share=self.link.share)
        release = functools.partial(self.sessions.remove, entry.id)  # freed before the answer goes out
        self._task = asyncio.create_task(self.session.run(entry.id, release), name=f"wyoming-asr-{entry.id}")

    def describe(self) -> dict[str, Any]:
        return {"front": "wyoming", **self.session.describe(), "utterances": self.transport.utterances,
                "answered": self.answered}

    def end_pacing(self) -> None:
        """The server drains: what was read is taken at once, not held to real time."""
        self.session.end_pacing()

    async def close(self) -> None:
        """Drop everything (the client left, or the answer is out)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._entry is not None:
            self.sessions.remove(self._entry.id)
            self._entry = None

    # ---- client events

    async def audio(self, fmt: AudioFormat, data: bytes) -> None:
        if self.transport.ended.is_set():
            return  # endpointed or refused: the rest of the audio is not needed
        samples = self._pcm.feed(fmt, data)
        if len(samples):
            await self.transport.offer(samples.astype("<f4").tobytes())

    async def stop(self) -> None:
        """``audio-stop``: end the stream and wait for the answer (unless endpointing
        already gave it); a session that failed on the way says why."""
        tail = self._pcm.flush()
        if len(tail):
            await self.transport.offer(tail.astype("<f4").tobytes())
        await self.transport.offer(End())
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), END_WAIT_S)
        failure = self.transport.failure
        if not self.answered and failure is not None and not self.transport.error_sent:
            code, reason = failure
            await self.link.send(msg.error(reason or "the transcription ended", CLOSE_CODES.get(code, "asr_failed")))
        await self.close()
