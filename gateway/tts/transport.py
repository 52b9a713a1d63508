"""How a TTS session meets its client: the ``TtsTransport`` interface, and the
native one (``/v1/tts``: JSON text messages in, JSON events and binary PCM out).

A session never touches a socket: it reads parsed ``ClientMessage`` objects
from its transport and hands it audio and events (the dict form of
docs/protocol.md). A foreign wire protocol (gateway/fronts/) is another
transport that translates its own messages into ``ClientMessage`` objects and
our events into its own, so every front runs the same session: the same queue
limits, back-pressure, cancellation and idle rules.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from starlette.websockets import WebSocket

from gateway.errors import BadMessage, TooLarge, close_socket
from gateway.protocol.tts import Ack, ClientMessage, TextLimits, parse_client_message


class TtsTransport(Protocol):
    async def receive(self) -> ClientMessage | None:
        """The next client message, or None when the client has left. Raises
        ``TooLarge`` for a message over the size limit (the session closes 1009)
        and another ``GatewayError`` for one it cannot use (sent back as an
        ``error`` event; the session goes on)."""
        ...

    async def send_audio(self, data: bytes) -> None:
        """One message of audio in the session's rate and encoding."""
        ...

    async def send_event(self, event: dict[str, Any]) -> None:
        """One event of docs/protocol.md (``start``, ``end``, ``cancelled``,
        ``flushed``, ``closed``, ``error``), in its dict form."""
        ...

    async def close(self, code: int, reason: str, timeout_s: float) -> None: ...


@runtime_checkable
class VoicingTransport(Protocol):
    """A transport that times its client's text itself (the ElevenLabs front's
    alignment): before each audio message it is told the utterance it voices,
    whose stream's marks say which text the audio carries (engines/timing.py)."""

    def voicing(self, stream: object, native_rate: int) -> None: ...


class NativeTtsTransport:
    """The ``/v1/tts`` wire protocol over a Starlette WebSocket."""

    def __init__(self, websocket: WebSocket, limits: TextLimits, *, acks: bool = False) -> None:
        self.websocket = websocket
        self.limits = limits
        self.acks = acks  # a resumable session's transport takes ``ack`` (gateway/tts/resumable.py)

    async def receive(self) -> ClientMessage | None:
        message = await self.websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        text, data = message.get("text"), message.get("bytes")
        size = len(text.encode("utf-8", "surrogatepass")) if text is not None else len(data or b"")
        max_bytes = self.limits.max_message_bytes
        if size > max_bytes:
            raise TooLarge(f"message of {size} bytes; the limit is {max_bytes}")
        if text is None:
            raise BadMessage("binary messages are not accepted on /v1/tts; send JSON text messages")
        parsed = parse_client_message(text, self.limits)
        if isinstance(parsed, Ack) and not self.acks:
            raise BadMessage("ack: this session keeps nothing to acknowledge; open it with resumable=true")
        return parsed

    async def send_audio(self, data: bytes) -> None:
        await self.websocket.send_bytes(data)

    async def send_event(self, event: dict[str, Any]) -> None:
        await self.websocket.send_text(json.dumps(event))

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        await close_socket(self.websocket, code, reason, timeout_s)
