"""One Wyoming synthesis request as the ``TtsTransport`` of a shared
``TtsSession`` (gateway/tts/session.py), which does the engine stream, the
back-pressure (at most ``max_buffer_s`` of audio waits for the client; past
it the synthesis pauses) and the idle and stall timeouts.

A request is a ``synthesize`` (its text cut into utterances of at most
``max_chars``, tts.py) or a streaming request (``synthesize-start`` to
``synthesize-stop``, its sentences arriving as the client sends them). The
transport hands the session one utterance at a time: the next is formed when
the one before has ended, so a streaming request's sentences that completed
while one was spoken become one utterance. Then the session's ``end``.

The session's audio goes out as Wyoming audio: a ``synthesize`` is one
``audio-start`` ... ``audio-stop`` over all its utterances; each utterance of a
streaming request is one, and ``synthesize-stopped`` follows the last. An
utterance that fails is an ``error`` event (its audio is still closed); a
failed ``synthesize`` speaks none of its remaining utterances.

``halt`` (the drain's deadline) is the session's ``cancel`` then ``end``: the
engine stream stops at the next frame, the queued audio is dropped, the audio
is closed and ``synthesize-stopped`` still answers a streaming request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.link import Link
from gateway.fronts.wyoming.messages import VoiceRequest
from gateway.protocol.common import End, Keepalive
from gateway.protocol.tts import Cancel, ClientMessage, Speak
from gateway.tts.sentences import SentenceBuffer


@dataclass
class Request:
    """What the client asked for; the texts wait here until the session takes them."""

    voice: VoiceRequest
    streamed: bool  # synthesize-start ... synthesize-stop
    texts: deque[str] = field(default_factory=deque)
    input_done: bool = False  # no more text will come (synthesize, or synthesize-stop seen)
    buffer: SentenceBuffer | None = None  # a streaming request's text not yet a sentence
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    heard: bool = False  # the client sent something since the session last heard of it

    def add(self, text: str) -> None:
        self.texts.append(text)
        self.changed.set()

    def hear(self) -> None:
        """The client sent more of this request (a sentence or not)."""
        self.heard = True
        self.changed.set()

    def end_input(self) -> None:
        rest = self.buffer.flush() if self.buffer is not None else ""
        if rest:
            self.texts.append(rest)
        self.input_done = True
        self.changed.set()


class SpeechTransport:
    """The ``TtsTransport`` of one request (see the module docstring)."""

    def __init__(self, link: Link, request: Request, rate: int, max_chars: int) -> None:
        self.link = link
        self.request = request
        self.rate = rate
        self.max_chars = max_chars
        self.completed = False  # the session's ``closed`` went out: every answer was given
        self.close_code: int | None = None
        self._control: deque[ClientMessage] = deque()
        self._speaking = False  # an utterance is with the session and has not ended
        self._failed = False
        self._ended = False  # the session's ``end`` was handed over
        self._audio_open = False
        self._gone = False

    def leave(self) -> None:
        """The client left: the session ends as for a closed socket."""
        self._gone = True
        self.request.changed.set()

    def halt(self) -> None:
        """Stop at the next frame, skip the rest, still close the audio."""
        if not self._ended:
            self._ended = True
            self._control.extend([Cancel(), End()])
            self.request.changed.set()

    async def receive(self) -> ClientMessage | None:
        request = self.request
        while True:
            if self._gone:
                return None
            if self._control:
                return self._control.popleft()
            if not self._ended and not self._speaking:
                if request.texts and not self._failed:
                    self._speaking = True
                    return Speak(text=self._next_text())
                if request.input_done or self._failed:
                    self._ended = True
                    return End()
            if request.heard and not self._ended:
                request.heard = False
                return Keepalive()  # the client is active: the session's idle rule counts it
            request.changed.clear()
            await request.changed.wait()  # ended by a client event, a session event or the session's end

    def _next_text(self) -> str:
        """The next utterance: one piece of a ``synthesize``, or every sentence of a
        streaming request that is waiting (within ``max_chars``)."""
        texts = self.request.texts
        text = texts.popleft()
        while self.request.streamed and texts and len(text) + 1 + len(texts[0]) <= self.max_chars:
            text = f"{text} {texts.popleft()}"
        return text

    async def send_audio(self, data: bytes) -> None:
        if not self._audio_open:
            self._audio_open = True
            await self.link.send(msg.audio_start(self.rate))
        await self.link.send(msg.audio_chunk(self.rate, data))

    async def send_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            await self.link.send(msg.error(str(event.get("message", "")), str(event.get("code", "engine_error"))))
            if "id" in event:  # an utterance failed
                self._utterance_over()
                if self.request.streamed:
                    await self._close_audio()
                else:
                    self._failed = True
        elif kind == "end":
            self._utterance_over()
            if self.request.streamed:
                await self._close_audio()
        elif kind == "cancelled":
            self._utterance_over()
        elif kind == "closed":
            if not self.request.streamed or self._audio_open:
                await self._close_audio()
            if self.request.streamed:
                await self.link.send(msg.synthesize_stopped())
            self.completed = True
        # start and flushed have no Wyoming counterpart

    def _utterance_over(self) -> None:
        self._speaking = False
        self.request.changed.set()

    async def _close_audio(self) -> None:
        if not self._audio_open:
            await self.link.send(msg.audio_start(self.rate))
        self._audio_open = False
        await self.link.send(msg.audio_stop())

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        self.close_code = code  # the connection decides: it goes on after a completed request
