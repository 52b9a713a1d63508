"""How a dictation session meets its client: the ``DictationTransport``
interface, and the native one (``/v1/dictation``: binary PCM and JSON control
messages in, JSON events out).

A session never touches a socket: it reads audio bytes and parsed
``ClientMessage`` objects from its transport and hands it typed events
(``ServerEvent`` of gateway/protocol/dictation.py); the transport turns each
into its wire form (the native one: the JSON of docs/protocol.md). A foreign wire protocol (gateway/fronts/) is another
transport, so every front runs the same session: the same decoding,
resampling, limits, replay on a sidecar restart and idle rules.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from starlette.websockets import WebSocket

from gateway.errors import TooLarge, close_socket
from gateway.protocol.dictation import (
    MAX_AUDIO_MESSAGE_BYTES,
    MAX_TEXT_MESSAGE_BYTES,
    ClientMessage,
    ServerEvent,
    parse_client_message,
)


class DictationTransport(Protocol):
    async def receive(self) -> bytes | ClientMessage | None:
        """The next message: audio bytes, a control message, or None when the
        client has left. Raises ``TooLarge`` for a message over its limit (the
        session closes 1009) and another ``GatewayError`` for one it cannot use
        (sent back as an ``error`` event; the session goes on)."""
        ...

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        """One event, in the transport's wire form; ``asyncio.TimeoutError``
        when the client does not take it within ``timeout_s``."""
        ...

    async def close(self, code: int, reason: str) -> None: ...


async def receive_bounded(websocket: WebSocket) -> bytes | str | None:
    """The client's next message of a dictation socket, native or a front's: audio
    (bytes) or text, each within its limit (``TooLarge`` past it); None once it left."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        data, text = message.get("bytes"), message.get("text")
        if data is not None:
            if len(data) > MAX_AUDIO_MESSAGE_BYTES:
                raise TooLarge(f"audio message of {len(data)} bytes; the limit is {MAX_AUDIO_MESSAGE_BYTES}, "
                               "send smaller chunks")
            return bytes(data)
        if text is not None:
            if len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_MESSAGE_BYTES:
                raise TooLarge(f"text message longer than {MAX_TEXT_MESSAGE_BYTES} bytes")
            return str(text)


class NativeDictationTransport:
    """The ``/v1/dictation`` wire protocol over a Starlette WebSocket."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def receive(self) -> bytes | ClientMessage | None:
        message = await receive_bounded(self.websocket)
        return parse_client_message(message) if isinstance(message, str) else message

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        await asyncio.wait_for(self.websocket.send_json(event.to_dict()), timeout_s)

    async def close(self, code: int, reason: str) -> None:
        await close_socket(self.websocket, code, reason)
