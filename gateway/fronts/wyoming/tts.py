"""The TTS side of one Wyoming connection, on the gateway's TTS engines.

Requests are queued (bounded) and run in order by one task owned by the
connection. ``synthesize`` gives one ``audio-start``, the audio of the whole
text, one ``audio-stop``. A streaming request (``synthesize-start``, chunks,
``synthesize-stop``) cuts the text into sentences as it arrives (the same
sentence buffer as /v1/tts); the first sentence starts speaking at once, and
the sentences that completed while it played are spoken together next (the
engine then prepares each while the one before plays), each group framed by
``audio-start`` / ``audio-stop``; ``synthesize-stopped`` follows the last.
The compatibility ``synthesize`` a streaming client sends inside its stream
is ignored.

Audio goes out at the engine's own rate, 16-bit mono, one ``audio-chunk`` per
engine frame (80 ms), as soon as the frame exists. A client that stops reading
pauses only its own synthesis; a client that leaves cancels it at the next
frame boundary.

The drain: ``finish`` ends an open streaming request as ``synthesize-stop``
would and returns once everything queued is spoken; ``halt`` (its deadline)
stops the synthesis at the next frame and skips what waits, still closing the
audio with ``audio-stop`` and answering ``synthesize-stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engines.base import EngineError, SynthesisOptions, TtsEngine
from gateway.errors import BadMessage, BadRequest, GatewayError, OverCapacity
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.link import Link, PeerGone, pcm16
from gateway.fronts.wyoming.messages import VoiceRequest
from gateway.protocol.tts import TextLimits
from gateway.registry import SessionRegistry
from gateway.tts.selection import check_ready, gateway_error, unknown_voice
from gateway.tts.sentences import SentenceBuffer, split_sentences

log = logging.getLogger("voxgate.wyoming")

MAX_QUEUED = 64
MAX_TEXT_CHARS = 20 * TextLimits().max_chars  # one synthesize event; each utterance stays within max_chars


@dataclass
class Job:
    texts: list[str]
    voice: VoiceRequest
    streamed: bool = False  # a sentence of a streaming request (may be joined with the ones queued after it)
    stopped: bool = False  # the end of a streaming request: answer synthesize-stopped


class Speaker:
    """Queue and run the connection's synthesis (see module docstring)."""

    def __init__(self, link: Link, engines: Mapping[str, TtsEngine], engine_id: str, sessions: SessionRegistry,
                 limits: TextLimits | None = None) -> None:
        self.link = link
        self.engines = engines
        self.engine_id = engine_id
        self.sessions = sessions
        self.limits = limits or TextLimits()
        self.streaming: VoiceRequest | None = None  # the voice of the open streaming request
        self._buffer = SentenceBuffer(self.limits.max_chars)
        self._jobs: deque[Job] = deque()
        self._work = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._idle = asyncio.Event()  # nothing queued, nothing running
        self._idle.set()
        self._halted = False

    # ---- client events

    async def synthesize(self, text: str, voice: VoiceRequest) -> None:
        if self.streaming is not None:
            return  # the compatibility copy of a streamed text
        if len(text) > MAX_TEXT_CHARS:
            raise GatewayError(f"text: {len(text)} characters; the limit is {MAX_TEXT_CHARS}", code="text_too_long")
        texts = self._utterances(text)
        if not texts:
            raise BadMessage("synthesize: \"text\" is empty")
        self._pick(voice)  # unknown voice or engine not ready: answer now, queue nothing
        await self._put(Job(texts, voice))

    async def start(self, voice: VoiceRequest) -> None:
        if self.streaming is not None:
            raise BadMessage("synthesize-start: a streaming request is already open; send synthesize-stop first")
        self._pick(voice)
        self.streaming = voice
        self._buffer.clear()

    async def chunk(self, text: str) -> None:
        voice = self._open_stream("synthesize-chunk")
        for sentence in self._buffer.append(text):
            await self._put(Job([sentence], voice, streamed=True))

    async def stop(self) -> None:
        voice = self._open_stream("synthesize-stop")
        rest = self._buffer.flush()
        if rest:
            await self._put(Job([rest], voice, streamed=True))
        self.streaming = None
        await self._put(Job([], voice, stopped=True))

    async def finish(self) -> None:
        """The drain: end the open streaming request, then wait until everything queued is spoken."""
        voice, self.streaming = self.streaming, None
        if voice is not None:  # queued past the limit if need be: the request was taken already
            rest = self._buffer.flush()
            for job in ([Job([rest], voice, streamed=True)] if rest else []) + [Job([], voice, stopped=True)]:
                self._queue(job)
        await self._idle.wait()  # bounded by the drain's deadline: ``halt``

    def halt(self) -> None:
        """Stop at the next frame and skip what waits (answers still go out)."""
        self._halted = True

    def halted(self) -> bool:  # a call: a frame's await may change it
        return self._halted

    def _open_stream(self, event: str) -> VoiceRequest:
        if self.streaming is None:
            raise BadMessage(f"{event}: no streaming request is open; send synthesize-start first")
        return self.streaming

    @property
    def busy(self) -> bool:
        """Synthesizing, or work is queued (the connection is not idle then)."""
        return self._running or bool(self._jobs)

    async def _put(self, job: Job) -> None:
        if len(self._jobs) >= MAX_QUEUED:
            raise GatewayError(f"{len(self._jobs)} requests are already queued on this connection (the limit is "
                               f"{MAX_QUEUED}); wait for their audio", code="too_many_utterances")
        self._queue(job)

    def _queue(self, job: Job) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"wyoming-tts-{self.link.client}")
        self._jobs.append(job)
        self._idle.clear()
        self._work.set()

    def _utterances(self, text: str) -> list[str]:
        """``text`` in pieces of at most ``max_chars``, cut between sentences where possible."""
        sentences, rest = split_sentences(text)
        buffer, out = SentenceBuffer(self.limits.max_chars), []
        for sentence in [*sentences, rest]:
            out.extend(buffer.append(sentence + " "))
        tail = buffer.flush()
        pieces = [*out, *([tail] if tail else [])]
        grouped: list[str] = []
        for piece in pieces:
            if grouped and len(grouped[-1]) + 1 + len(piece) <= self.limits.max_chars:
                grouped[-1] += " " + piece
            else:
                grouped.append(piece)
        return grouped

    # ---- engine and voice

    def _pick(self, voice: VoiceRequest) -> tuple[TtsEngine, str | None]:
        """The engine and voice id for a request; raises the error to answer with."""
        order = [self.engine_id, *sorted(e for e in self.engines if e != self.engine_id)]
        engine_id, voice_id = self.engine_id, None
        if voice.name:
            owner = next((e for e in order if e in self.engines and
                          voice.name in {v.id for v in self.engines[e].voices()}), None)
            if owner is None:
                available = sorted({v.id for e in self.engines.values() for v in e.voices()})
                raise unknown_voice(voice.name, available)
            engine_id, voice_id = owner, voice.name
        elif voice.language:
            wanted = voice.language.replace("-", "_").split("_")[0].lower()
            for candidate in order:
                engine = self.engines.get(candidate)
                match = next((v.id for v in engine.voices() if v.language == wanted), None) if engine else None
                if match is not None:
                    engine_id, voice_id = candidate, match
                    break
        engine = self.engines.get(engine_id)
        if engine is None:
            raise BadRequest(f"no TTS engine is enabled on this gateway ({engine_id} is not loaded)",
                             code="unknown_engine")
        check_ready(engine)
        return engine, voice_id or engine.info().default_voice

    # ---- the worker

    async def _run(self) -> None:
        try:
            while True:
                while not self._jobs:
                    self._work.clear()
                    await self._work.wait()
                job = self._jobs.popleft()
                self._running = True
                try:
                    if job.stopped:
                        await self.link.send(msg.synthesize_stopped())
                    elif not self.halted():
                        if job.streamed:
                            self._join_queued(job)
                        await self._speak(job)
                finally:
                    self._running = False
                    if not self._jobs:
                        self._idle.set()
        except PeerGone:
            return  # the connection notices on its side and closes
        finally:
            self._idle.set()  # nothing more will run

    def _join_queued(self, job: Job) -> None:
        """Take the streamed sentences already waiting behind ``job`` into it (one engine utterance)."""
        text = " ".join(job.texts)
        while self._jobs:
            nxt = self._jobs[0]
            more = " ".join(nxt.texts)
            if not nxt.streamed or nxt.voice != job.voice or len(text) + 1 + len(more) > self.limits.max_chars:
                break
            self._jobs.popleft()
            text = f"{text} {more}"
        job.texts[:] = [text]

    async def _speak(self, job: Job) -> None:
        try:
            engine, voice_id = self._pick(job.voice)
        except GatewayError as exc:
            await self.link.send(msg.error(exc.message, exc.code))
            return
        try:
            # queued before the drain began (the connection refuses every event after): it is spoken
            entry = self.sessions.claim("tts", f"wyoming:{self.link.client}", lambda: {"front": "wyoming"},
                                        share=self.link.share, taken_before_drain=True)
        except OverCapacity as full:
            await self.link.send(msg.error(full.message, full.code))
            return
        rate = engine.info().sample_rate
        started = False
        try:
            for text in job.texts:
                if self.halted():
                    break
                options = SynthesisOptions(extra={"speaker": job.voice.speaker} if job.voice.speaker else {})
                stream = engine.open_stream(text, voice_id, options)
                frames = stream.frames()
                try:
                    async for frame in frames:
                        if self.halted():
                            break
                        if not started:
                            started = True
                            await self.link.send(msg.audio_start(rate))
                        await self.link.send(msg.audio_chunk(rate, pcm16(frame)))
                finally:
                    stream.cancel()
                    aclose: Any = getattr(frames, "aclose", None)
                    if aclose is not None:
                        await aclose()
        except EngineError as exc:
            error = gateway_error(exc)
            await self.link.send(msg.error(error.message, error.code))
        finally:
            self.sessions.remove(entry.id)
        if not started:
            await self.link.send(msg.audio_start(rate))
        await self.link.send(msg.audio_stop())

    async def close(self) -> None:
        """Cancel what runs and drop what waits (the client left)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
