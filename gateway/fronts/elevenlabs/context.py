"""One ElevenLabs context: a ``TtsSession`` with its own ``TtsTransport``.

The socket's reader (connection.py) translates client messages into the
session's and puts them on the context's bounded queue, which ``receive``
reads. The session's audio and events go back through the socket's one
``Sender`` as ElevenLabs messages: audio with its approximate alignment
(alignment.py), ``isFinal`` at the session's ``closed``, errors in ElevenLabs'
shape. ``stream-input`` is one context without an id; ``multi-stream-input``
runs one per ``context_id``.

Closing a context the way ElevenLabs does: text that was flushed is still
spoken, then ``isFinal``; with text not flushed, or when asked a second time,
the context stops at once (barge-in). The first is a ``flush`` with the
``CLOSE_MARK`` id, whose ``flushed`` answer is turned into the session's ``end``
here; the second a ``cancel`` then ``end``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from gateway.errors import CODES
from gateway.fronts.elevenlabs.alignment import CharClock, SpeechRate
from gateway.fronts.elevenlabs.messages import audio_message, error_message, final_message
from gateway.fronts.elevenlabs.params import AudioFormat
from gateway.protocol.common import End
from gateway.protocol.tts import Cancel, ClientMessage, Flush
from gateway.registry import SessionEntry
from gateway.tts.session import TtsSession

QUEUE_SIZE = 64  # client messages waiting for one context's session
CLOSE_MARK = "close"
TEXT_NOT_TAKEN = ("text was not taken: the server is stopping; the text sent before is spoken, send the rest "
                  "again on a new connection")


class Sender:
    """Every message of one socket goes out here, one at a time: the contexts'
    sessions and the reader share the socket."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any], timeout_s: float | None = None) -> None:
        async with self._lock:
            send = self.websocket.send_text(json.dumps(message))
            await (asyncio.wait_for(send, timeout_s) if timeout_s is not None else send)


class ContextTransport:
    """The ``TtsTransport`` of one context."""

    def __init__(self, sender: Sender, context_id: str | None, audio: AudioFormat) -> None:
        self.sender = sender
        self.context_id = context_id
        self.audio = audio
        self.queue: asyncio.Queue[ClientMessage | None] = asyncio.Queue(QUEUE_SIZE)
        self.rate = SpeechRate()
        self.final_sent = False
        self.ending = False  # the session's end is queued: nothing is left to stop
        self.close_code: tuple[int, str] | None = None
        self._clock: CharClock | None = None
        self._utterances = 0

    async def receive(self) -> ClientMessage | None:
        return await self.queue.get()

    def voicing(self, stream: object, native_rate: int) -> None:
        """The audio that follows is ``stream``'s: its marks time the alignment (alignment.py)."""
        if self._clock is not None:
            self._clock.follow(stream, native_rate)

    async def send_audio(self, data: bytes) -> None:
        alignment = self._clock.take(self.audio.duration_ms(data)) if self._clock is not None else None
        await self.sender.send(audio_message(base64.b64encode(data).decode("ascii"), alignment, self.context_id))

    async def send_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "start":
            self._clock = CharClock(str(event.get("text", "")), self.rate, leading_space=self._utterances > 0)
            self._utterances += 1
        elif kind == "end" and self._clock is not None:
            rest, self._clock = self._clock.rest(), None
            if rest is not None:  # characters the audio ran out before: an alignment-only chunk
                await self.sender.send(audio_message("", rest, self.context_id))
        elif kind == "flushed" and event.get("id") == CLOSE_MARK:
            # everything flushed is out: end the session (the reader puts nothing more on a
            # closing context's queue, so there is room)
            self.ending = True
            self.queue.put_nowait(End())
        elif kind == "closed":
            self.final_sent = True
            await self.sender.send(final_message(self.context_id))
        elif kind == "error":
            code = str(event.get("code", "internal_error"))
            status = CODES[code].http_status if code in CODES else 500
            # the session's own wording names messages of /v1/tts
            message = TEXT_NOT_TAKEN if code == "draining" else str(event.get("message", ""))
            await self.sender.send(error_message(code, message, status, self.context_id))
        # cancelled: ElevenLabs says nothing; the audio simply stops

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        self.close_code = (code, reason)  # the connection closes the socket or ends the context


@dataclass
class Context:
    key: str | None  # the client's context_id (None: the one context of stream-input)
    transport: ContextTransport
    session: TtsSession
    entry: SessionEntry
    task: asyncio.Task[None] | None = None
    text_unflushed: bool = False  # text came since the last flush
    closing: bool = False  # close_context seen: flushed text is finishing
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def put(self, message: ClientMessage, timeout_s: float) -> None:
        await asyncio.wait_for(self.transport.queue.put(message), timeout_s)

    def close_messages(self) -> list[ClientMessage]:
        """What ``close_context`` becomes: finish the flushed text, or stop now."""
        if self.transport.ending:
            return []
        if self.closing or self.text_unflushed:
            return [Cancel(), End()]
        self.closing = True
        return [Flush(id=CLOSE_MARK)]
