"""One Wyoming client connection: read events, answer them, own the work.

The reader takes events in order and dispatches them; a transcription runs
as a dictation session on its own task (asr.py) and synthesis on its own
worker (both owned here and ended when the connection ends), so audio keeps
flowing out while events come in. While the session holds its audio to real
time, handing it an ``audio-chunk`` waits, so the reader reads no further.
A read is never cut off half-way: the pending read survives the idle check,
which closes a connection that sent nothing for ``idle_timeout_s`` unless its
synthesis is still going out.

Errors that the client can fix (a bad field, an unknown voice, over capacity)
are ``error`` events and the connection goes on; broken framing ends it.
Unknown event types are ignored, as the Wyoming spec asks of servers.

The drain before a stop (``drain``; the server holds every connection in the
session registry): a transcription under way gets its transcript for the
audio read so far (taken at once, no longer held to real time), as if
``audio-stop`` had come; a synthesis under way
finishes (an open streaming request as if ``synthesize-stop`` had come: its
``synthesize-stopped`` goes out); every event read after the drain began is
answered ``error`` ``draining``; then the connection closes. An idle one
closes at once. At the drain's deadline synthesis stops at the next frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from engines.base import AsrService, TtsEngine
from gateway.config import Settings
from gateway.engine_view import public_model_name
from gateway.errors import BadMessage, GatewayError
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.asr import Transcription
from gateway.fronts.wyoming.info import ASR_PROGRAM, TTS_PROGRAM_PREFIX, build_info, tts_program_name
from gateway.fronts.wyoming.link import Link, PeerGone
from gateway.fronts.wyoming.messages import AudioFormat, Transcribe, VoiceRequest
from gateway.fronts.wyoming.tts import Speaker
from gateway.fronts.wyoming.wire import Event, WireError, read_event
from gateway.registry import SessionRegistry

log = logging.getLogger("voxgate.wyoming")

CLOSE_TIMEOUT_S = 5.0
NOT_TAKEN = ("{} was not taken: the server is stopping; what was sent before it is finished, send it again on a "
             "new connection")


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str,
                 settings: Settings, state: Mapping[str, Any], version: str) -> None:
        self.reader = reader
        self.version = version
        self.writer = writer
        self.settings = settings
        self.engines: Mapping[str, TtsEngine] = state["tts"]
        self.asr: AsrService | None = state["asr"]
        self.sessions: SessionRegistry = state["sessions"]
        self.link = Link(writer, client, settings.idle_timeout_s)
        self.speaker = Speaker(self.link, self.engines, settings.tts_engine, self.sessions, settings.idle_timeout_s)
        self.request: Transcribe | None = None  # the last transcribe, for the next audio
        self.transcription: Transcription | None = None
        self._refused = False  # the current audio was refused: drop it until audio-stop
        self._drain_begun = asyncio.Event()

    def drain(self, now: bool) -> None:
        """Finish the work under way, then close (see the module docstring);
        ``now``: synthesis stops at the next frame."""
        self._drain_begun.set()
        if self.transcription is not None:  # a pause of its pacing ends: the dispatch under way returns
            self.transcription.end_pacing()
        if now:
            self.speaker.halt()

    async def run(self) -> None:
        pending: asyncio.Task[Event | None] | None = None
        drain_begun = asyncio.ensure_future(self._drain_begun.wait())
        finishing: asyncio.Task[None] | None = None  # the drain's: the work under way
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(read_event(self.reader))
                done, _ = await asyncio.wait({pending, finishing or drain_begun}, timeout=self.settings.idle_timeout_s,
                                             return_when=asyncio.FIRST_COMPLETED)
                if finishing is None and drain_begun in done:
                    finishing = asyncio.create_task(self._finish_work(), name=f"wyoming-drain-{self.link.client}")
                    continue
                if finishing is not None and finishing in done:
                    return
                if pending not in done:
                    if self._busy() or finishing is not None:
                        continue
                    log.info("wyoming %s: idle for %g s, closing", self.link.client, self.settings.idle_timeout_s)
                    return
                task, pending = pending, None
                try:
                    event = task.result()
                except WireError as exc:
                    await self.link.send(msg.error(str(exc), "bad_message"))
                    return
                except (ConnectionError, OSError):
                    return
                if event is None:
                    return
                if finishing is not None:
                    await self.link.send(msg.error(NOT_TAKEN.format(event.type[:40]), "draining"))
                    continue
                try:
                    await self._dispatch(event)
                except GatewayError as exc:
                    await self.link.send(msg.error(exc.message, exc.code))
        except PeerGone:
            return
        finally:
            leftovers: list[asyncio.Future[Any]] = [t for t in (pending, drain_begun, finishing) if t is not None]
            for leftover in leftovers:
                leftover.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await leftover
            await self._close()

    def _busy(self) -> bool:
        # Audio that stops coming is idleness too: only synthesis (the client reads, sends nothing) is not.
        return self.speaker.busy

    async def _finish_work(self) -> None:
        try:
            if self.transcription is not None:
                await self._stop_audio()
            await self.speaker.finish()
        except GatewayError as exc:
            await self.link.send(msg.error(exc.message, exc.code))

    async def _close(self) -> None:
        await self.speaker.close()
        if self.transcription is not None:
            await self.transcription.close()
            self.transcription = None
        self.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.writer.wait_closed(), CLOSE_TIMEOUT_S)

    # ---- events

    async def _dispatch(self, event: Event) -> None:
        kind = event.type
        if kind == "describe":
            await self.link.send(build_info(self.engines, self.speaker.engine_id, self.asr, self.version))
        elif kind == "ping":
            text = event.data.get("text")
            await self.link.send(msg.pong(text if isinstance(text, str) else None))
        elif kind == "select-program":
            self._select(msg.program_name(event))
        elif kind == "transcribe":
            request = Transcribe.from_event(event)
            model = public_model_name(self.asr.model_name) if self.asr is not None else None
            if request.name is not None and request.name != model:
                raise BadMessage(f"transcribe: no model {request.name[:60]!r}; the model here is {model or '(none)'}")
            self.request = request
        elif kind == "audio-start":
            await self._start_audio(AudioFormat.from_event(event))
        elif kind == "audio-chunk":
            await self._audio(event)
        elif kind == "audio-stop":
            await self._stop_audio()
        elif kind == "synthesize":
            await self.speaker.synthesize(msg.text_of(event), VoiceRequest.from_event(event))
        elif kind == "synthesize-start":
            await self.speaker.start(VoiceRequest.from_event(event))
        elif kind == "synthesize-chunk":
            await self.speaker.chunk(msg.text_of(event))
        elif kind == "synthesize-stop":
            await self.speaker.stop()
        else:
            log.debug("wyoming %s: ignoring event %r", self.link.client, kind[:40])

    def _select(self, name: str) -> None:
        if name == ASR_PROGRAM:
            return
        engine = name.removeprefix(TTS_PROGRAM_PREFIX)
        if name.startswith(TTS_PROGRAM_PREFIX) and engine in self.engines:
            self.speaker.engine_id = engine
            return
        programs = [ASR_PROGRAM, *(tts_program_name(e) for e in sorted(self.engines))]
        raise BadMessage(f"select-program: no program {name[:60]!r}; programs: {', '.join(programs)}")

    async def _start_audio(self, fmt: AudioFormat) -> None:
        if self.transcription is not None:  # a new stream replaces one that never saw audio-stop
            await self.transcription.close()
            self.transcription = None
        self._refused = False
        transcription = Transcription(self.link, self.asr, self.request or Transcribe(), self.sessions,
                                      self.settings, fmt)
        try:
            transcription.open()
        except GatewayError:
            self._refused = True
            raise
        self.transcription = transcription

    async def _audio(self, event: Event) -> None:
        fmt = AudioFormat.from_event(event)
        if self._refused:
            return
        if self.transcription is None:  # audio with no audio-start: start one, as other servers do
            await self._start_audio(fmt)
        assert self.transcription is not None
        await self.transcription.audio(fmt, event.payload)

    async def _stop_audio(self) -> None:
        transcription, self.transcription = self.transcription, None
        request, self.request = self.request, None
        if self._refused:
            self._refused = False
            return
        if transcription is None:  # audio-stop with no audio: an empty answer
            language = request.language if request else None
            for event in (msg.transcript_start(language), msg.transcript("", language), msg.transcript_stop()):
                await self.link.send(event)
            return
        try:
            await transcription.stop()
        finally:
            await transcription.close()
