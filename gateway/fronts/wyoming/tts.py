"""The TTS side of one Wyoming connection, on the gateway's shared TTS session.

Requests are queued (bounded) and run in order by one task owned by the
connection; each runs as a ``TtsSession`` (gateway/tts/session.py) of the
engine its voice belongs to, with a ``SpeechTransport`` (speech.py) that
turns the session's audio and events into Wyoming's. ``synthesize`` gives one
``audio-start``, the audio of the whole text, one ``audio-stop``. A streaming
request (``synthesize-start``, chunks, ``synthesize-stop``) cuts the text into
sentences as it arrives (the same sentence buffer as /v1/tts); the first
sentence starts speaking at once, and the sentences that completed while it
played are spoken together next, each group framed by ``audio-start`` /
``audio-stop``; ``synthesize-stopped`` follows the last. The compatibility
``synthesize`` a streaming client sends inside its stream is ignored.

Audio goes out at the engine's own rate, 16-bit mono, one ``audio-chunk`` per
engine frame (80 ms), as soon as the frame exists. The session holds at most
``max_buffer_s`` of audio for a client that stops reading, then pauses only
its own synthesis; a client that leaves cancels it at the next frame boundary;
a session that ends otherwise (the client read nothing, or sent nothing while
its streaming request waited, for ``idle_timeout_s``) ends the connection.

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

from engines.base import TtsEngine
from gateway.codecs.formats import OutputFormat
from gateway.errors import BadMessage, BadRequest, GatewayError, OverCapacity
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.link import Link, PeerGone
from gateway.fronts.wyoming.messages import VoiceRequest
from gateway.fronts.wyoming.speech import Request, SpeechTransport
from gateway.protocol.tts import TextLimits
from gateway.registry import SessionRegistry
from gateway.tts.selection import check_options, check_ready, unknown_voice
from gateway.tts.sentences import SentenceBuffer, split_sentences
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig

log = logging.getLogger("voxgate.wyoming")

MAX_QUEUED = 64
CLOSE_WAIT_S = SessionConfig.close_timeout_s + 1.0  # a session ending its own tasks, when the client left
MAX_TEXT_CHARS = 20 * TextLimits().max_chars  # one synthesize event; each utterance stays within max_chars


class Speaker:
    """Queue and run the connection's synthesis (see module docstring)."""

    def __init__(self, link: Link, engines: Mapping[str, TtsEngine], engine_id: str, sessions: SessionRegistry,
                 idle_timeout_s: float, limits: TextLimits | None = None) -> None:
        self.link = link
        self.engines = engines
        self.engine_id = engine_id
        self.sessions = sessions
        self.limits = limits or TextLimits()
        self.idle_timeout_s = idle_timeout_s
        self.streaming: Request | None = None  # the open streaming request
        self._requests: deque[Request] = deque()
        self._current: tuple[Request, SpeechTransport | None] | None = None
        self._work = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()  # nothing queued, nothing running
        self._idle.set()
        self._halted = False
        self._closed = False  # the client left: nothing more starts

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
        self._check_room(1)
        self._queue(Request(voice, streamed=False, texts=deque(texts), input_done=True))

    async def start(self, voice: VoiceRequest) -> None:
        if self.streaming is not None:
            raise BadMessage("synthesize-start: a streaming request is already open; send synthesize-stop first")
        self._pick(voice)
        self._check_room(1)
        self.streaming = Request(voice, streamed=True, buffer=SentenceBuffer(self.limits.max_chars))
        self._queue(self.streaming)

    async def chunk(self, text: str) -> None:
        request = self._open_stream("synthesize-chunk")
        assert request.buffer is not None
        for sentence in request.buffer.append(text):
            self._check_room(1)
            request.add(sentence)
        request.hear()

    async def stop(self) -> None:
        request = self._open_stream("synthesize-stop")
        self.streaming = None
        request.end_input()

    async def finish(self) -> None:
        """The drain: end the open streaming request, then wait until everything queued is spoken."""
        request, self.streaming = self.streaming, None
        if request is not None:  # past the queue limit if need be: the request was taken already
            request.end_input()
        await self._idle.wait()  # bounded by the drain's deadline: ``halt``

    def halt(self) -> None:
        """Stop at the next frame and skip what waits (answers still go out)."""
        self._halted = True
        if self._current is not None:
            self._current[0].changed.set()
        if self._current is not None and self._current[1] is not None:
            self._current[1].halt()

    def _open_stream(self, event: str) -> Request:
        if self.streaming is None:
            raise BadMessage(f"{event}: no streaming request is open; send synthesize-start first")
        return self.streaming

    @property
    def busy(self) -> bool:
        """Synthesizing, or work is queued (the connection is not idle then)."""
        return self._current is not None or bool(self._requests)

    def _check_room(self, adding: int) -> None:
        """A request waiting counts once against ``MAX_QUEUED``, a streaming request each sentence it holds."""
        queued = sum(len(r.texts) if r.streamed else 1 for r in self._requests)
        if self._current is not None and self._current[0].streamed:
            queued += len(self._current[0].texts)
        if queued + adding > MAX_QUEUED:
            raise GatewayError(f"{queued} requests are already queued on this connection (the limit is "
                               f"{MAX_QUEUED}); wait for their audio", code="too_many_utterances")

    def _queue(self, request: Request) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"wyoming-tts-{self.link.client}")
        self._requests.append(request)
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
            else:
                spoken = sorted({v.language for e in self.engines.values() for v in e.voices() if v.language})
                raise BadRequest(f"voice.language: no voice here speaks {voice.language[:20]!r}; languages: "
                                 f"{', '.join(spoken) or '(none)'}")
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
                while not self._requests:
                    self._work.clear()
                    await self._work.wait()
                if self._closed:
                    return
                request = self._requests.popleft()
                self._current = (request, None)
                try:
                    await self._serve(request)
                finally:
                    self._current = None
                    if not self._requests:
                        self._idle.set()
        except PeerGone:
            return  # the connection notices on its side and closes
        finally:
            self._idle.set()  # nothing more will run

    async def _serve(self, request: Request) -> None:
        """Run one request as a TTS session of its voice's engine."""
        if self._halted:
            if request.streamed:
                await self.link.send(msg.synthesize_stopped())
            return
        options = {"speaker": request.voice.speaker} if request.voice.speaker else {}
        try:
            engine, voice_id = self._pick(request.voice)
            check_options(engine, None, options, prefix="voice.")
        except GatewayError as exc:
            await self._refuse(request, exc)
            return
        rate = engine.info().sample_rate
        transport = SpeechTransport(self.link, request, rate, self.limits.max_chars)
        session = TtsSession(transport=transport, engine=engine, voice=voice_id, sample_rate=rate,
                             encoding=OutputFormat.PCM_S16LE, engine_options=options,
                             config=SessionConfig(limits=self.limits, idle_timeout_s=self.idle_timeout_s))
        try:
            # queued before the drain began (the connection refuses every event after): it is spoken
            entry = self.sessions.claim("tts", f"wyoming:{self.link.client}",
                                        lambda: {"front": "wyoming", **session.describe()},
                                        share=self.link.share, taken_before_drain=True)
        except OverCapacity as full:
            await self._refuse(request, full)
            return
        self._current = (request, transport)
        try:
            await session.run()
        finally:
            self.sessions.remove(entry.id)
        if not transport.completed:  # the client left, read nothing or sent nothing for too long
            if not self._closed:
                log.info("wyoming %s: synthesis ended (close %s), closing", self.link.client,
                         transport.close_code)
            self.link.hang_up()
            raise PeerGone("the synthesis session ended before its answer")

    async def _refuse(self, request: Request, error: GatewayError) -> None:
        """Answer ``error``; a streaming request still gets its ``synthesize-stopped``
        once the client has ended it (its text is dropped as it comes)."""
        await self.link.send(msg.error(error.message, error.code))
        if not request.streamed:
            return
        while not request.input_done and not self._halted:
            request.texts.clear()
            request.changed.clear()
            try:
                await asyncio.wait_for(request.changed.wait(), self.idle_timeout_s)
            except asyncio.TimeoutError:
                self.link.hang_up()
                raise PeerGone(f"the client sent nothing for {self.idle_timeout_s:g} s") from None
        await self.link.send(msg.synthesize_stopped())

    async def close(self) -> None:
        """Drop what waits and end what runs (the client left): a session ends as
        its transport says the client left, so it ends its own tasks."""
        task, self._task = self._task, None
        self._closed = True
        if task is None:
            return
        if self._current is not None and self._current[1] is not None:
            self._current[1].leave()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(task), CLOSE_WAIT_S)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
