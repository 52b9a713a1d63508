"""One Wyoming transcription on the gateway's ASR service.

``audio-start`` opens a dictation stream (counted against the same limit as
/v1/dictation sockets); each ``audio-chunk`` is converted to 16 kHz mono and
sent on; ``audio-stop`` ends the stream and, once the last final is in, the
answer goes out. While audio flows, the stream's events become Wyoming's
streaming transcript: ``transcript-start`` at the first speech, and a
``transcript-chunk`` whenever the stable (committed) prefix of the current
utterance grows or an utterance is final. Chunks are append-only, so their
concatenation is the transcript; the legacy ``transcript`` (all finals,
space-joined) and ``transcript-stop`` close it.

Endpointing: a ``transcribe`` with ``vad_sensitivity`` asks the server to
find the end of the voice command. The stream then ends an utterance after
that much silence, and the first final that holds words is the answer, sent
at once, before ``audio-stop``; audio after it is ignored.

Pacing: like a /v1/dictation socket, a connection may send audio at most
``VOXGATE_DICTATION_MAX_AHEAD_S`` ahead of real time (the connection's
``Pacer``, gateway/dictation/pacing.py); past that ``audio`` waits before it
returns, so the connection reads no further event and TCP pushes back on the
client. The wait ends early when ``until`` is done (the drain began).

The stream counts against the dictation limits, the global one and the
client address's share (gateway/registry.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from engines.base import AsrService, AsrStreamHandle, EngineState
from gateway.dictation.faults import disabled_error, unavailable_error
from gateway.dictation.pacing import Pacer
from gateway.errors import BadRequest, GatewayError
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.link import Link, PcmIn
from gateway.fronts.wyoming.messages import AudioFormat, Transcribe
from gateway.protocol.common import Closed
from gateway.protocol.dictation import Final, Partial, SpeechStarted
from gateway.registry import SessionEntry, SessionRegistry

log = logging.getLogger("voxgate.wyoming")

ASR_RATE = 16000
DEFAULT_SILENCE_MS = 500
END_WAIT_S = 120.0  # after audio-stop: the last final may queue behind other streams' decodes
ASR_START_WAIT_S = 30.0


class Transcription:
    """From ``audio-start`` to the answer; ``close()`` drops it at any point."""

    def __init__(self, link: Link, asr: AsrService | None, request: Transcribe, sessions: SessionRegistry, *,
                 pacer: Pacer, until: asyncio.Future[Any]) -> None:
        self.link = link
        self.asr = asr
        self.request = request
        self.sessions = sessions
        self.pacer = pacer  # the connection's: its streams share one real-time allowance
        self.until = until
        self.stream: AsrStreamHandle | None = None
        self.answered = False
        self._pcm = PcmIn(ASR_RATE)
        self._entry: SessionEntry | None = None
        self._relay: asyncio.Task[None] | None = None
        self._started = False  # transcript-start sent
        self._finals: list[str] = []
        self._sent = ""  # every chunk sent so far, concatenated
        self._utterance_sent = ""  # what was sent of the open utterance
        self._language: str | None = request.language

    # ---- lifecycle

    async def open(self) -> None:
        """Open the ASR stream; raises ``GatewayError`` when that cannot be done now."""
        asr = await self._usable_asr()
        self._entry = entry = self.sessions.claim("dictation", f"wyoming:{self.link.client}", self.describe,
                                                  share=self.link.share)
        silence_ms = self.request.endpoint_silence_ms or DEFAULT_SILENCE_MS
        try:
            self.stream = await asr.open_stream({"language": self.request.language, "interim": True,
                                                 "word_timestamps": False, "silence_ms": silence_ms})
        except BaseException:
            self._release()
            raise
        self._relay = asyncio.create_task(self._relay_events(self.stream), name=f"wyoming-asr-{entry.id}")

    async def _usable_asr(self) -> AsrService:
        asr = self.asr
        if asr is None:
            raise disabled_error()
        state = asr.status().state
        if state in (EngineState.MISSING, EngineState.FAILED) or (
                state is EngineState.LOADING and asr.restarts == 0 and not await asr.wait_ready(ASR_START_WAIT_S)):
            raise unavailable_error(asr.status())
        languages = asr.info().get("languages") or []
        language = self.request.language
        if language and languages and language.split("-")[0].split("_")[0] not in languages:
            raise BadRequest(f"language: the ASR model {asr.model_name} does not support {language!r} "
                             f"(available: {', '.join(languages[:20])})", code="unsupported_language")
        return asr

    def describe(self) -> dict[str, Any]:
        stream = self.stream
        return {"front": "wyoming", "audio_s": round(stream.audio_s, 3) if stream else 0.0,
                "utterances": len(self._finals), "answered": self.answered}

    async def close(self) -> None:
        """Drop everything (the client left, or the answer is out)."""
        relay, self._relay = self._relay, None
        if relay is not None and not relay.done():
            relay.cancel()
        if relay is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await relay
        stream, self.stream = self.stream, None
        if stream is not None:
            await stream.close()
        self._release()

    def _release(self) -> None:
        if self._entry is not None:
            self.sessions.remove(self._entry.id)
            self._entry = None

    # ---- client events

    async def audio(self, fmt: AudioFormat, data: bytes) -> None:
        if self.answered or self.stream is None:
            return  # endpointed already: the rest of the audio is not needed
        samples = self._pcm.feed(fmt, data)
        if len(samples):
            await self.stream.send_audio(samples)
            await self.pacer.hold(len(samples) / ASR_RATE, self.until)  # ahead of real time: read no more for now

    async def stop(self) -> None:
        """``audio-stop``: finish the stream and answer (unless endpointing already did)."""
        stream = self.stream
        if not self.answered and stream is not None:
            tail = self._pcm.flush()
            if len(tail):
                await stream.send_audio(tail)
            await stream.end()
            relay = self._relay
            assert relay is not None
            try:
                await asyncio.wait_for(asyncio.shield(relay), END_WAIT_S)  # it ends at the stream's closed
            except asyncio.TimeoutError:
                raise GatewayError(f"the transcript did not arrive within {END_WAIT_S:.0f} s",
                                   code="asr_timeout") from None
            if not self.answered:
                await self._answer()
        await self.close()

    # ---- stream events -> Wyoming

    async def _relay_events(self, stream: AsrStreamHandle) -> None:
        while True:
            item = await stream.events.get()
            if isinstance(item, dict):  # an error event of the service (e.g. a sidecar restart)
                if item.get("retryable"):
                    log.info("wyoming %s: %s", self.link.client, item.get("message"))
                    continue
                await self.link.send(msg.error(str(item.get("message", "")), str(item.get("code", "asr_failed"))))
            elif isinstance(item, SpeechStarted):
                await self._start()
            elif isinstance(item, Partial):
                await self._advance(item.stable)
            elif isinstance(item, Final):
                await self._final(item)
            elif isinstance(item, Closed):
                return

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            await self.link.send(msg.transcript_start(self._language))

    async def _advance(self, stable: str) -> None:
        """Send what the utterance's committed text gained since the last chunk."""
        if self.answered or not stable.startswith(self._utterance_sent) or len(stable) == len(self._utterance_sent):
            return
        gained = stable[len(self._utterance_sent):]
        if not self._utterance_sent:  # an utterance's first words: one space from the one before, none at the start
            gained = gained.lstrip()
            if not gained:
                return
            if self._sent:
                gained = " " + gained
        await self._start()
        self._utterance_sent = stable
        self._sent += gained
        await self.link.send(msg.transcript_chunk(gained))

    async def _final(self, final: Final) -> None:
        if self.answered:
            return
        full = final.text.rstrip()
        text = full.strip()
        if final.language:
            self._language = final.language
        if text:
            await self._advance(full if full.startswith(self._utterance_sent) else text)
            self._finals.append(text)
        self._utterance_sent = ""
        if text and self.request.endpoint_silence_ms is not None:
            await self._answer()

    async def _answer(self) -> None:
        self.answered = True
        text = " ".join(self._finals)
        await self._start()
        await self.link.send(msg.transcript(text, self._language))
        await self.link.send(msg.transcript_stop())
