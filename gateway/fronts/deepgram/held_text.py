"""The text messages of a Deepgram TTS socket, read while the socket is held open.

Deepgram keeps a quiet TTS socket for about an hour, and the agent frameworks
(Pipecat, LiveKit) hold one open between answers without sending anything, so
while the client is quiet its session is told it is still there (a
``Keepalive`` whenever the client has been quiet for a third of the session's
idle timeout) until it has been quiet for ``HOLD_IDLE_S``. Once the client
said it is done (``ending``), a read just waits.
"""

from __future__ import annotations

import asyncio
import time

from starlette.websockets import WebSocket

from gateway.errors import BadMessage, TooLarge
from gateway.protocol.common import Keepalive
from gateway.protocol.tts import TextLimits

HOLD_IDLE_S = 3600.0  # how long a quiet socket stays open, as at Deepgram (which then closes it, NET-0003)


class HeldTextInbox:
    def __init__(self, websocket: WebSocket, idle_timeout_s: float, limits: TextLimits) -> None:
        self.websocket = websocket
        self.limits = limits
        self.ending = False  # the client sent its Close: no more keepalives on its behalf
        self._keepalive_after_s = idle_timeout_s / 3
        self._heard_at = time.monotonic()  # the client's last message

    async def next_text(self, binary_refusal: str) -> str | Keepalive | None:
        """The client's next text message (its size checked), a ``Keepalive`` for a quiet
        client, or None once it disconnected; a binary message is refused with ``binary_refusal``."""
        if self.ending or time.monotonic() - self._heard_at >= HOLD_IDLE_S:
            message = await self.websocket.receive()
        else:
            try:  # cancelling a pending ASGI receive loses no message
                message = await asyncio.wait_for(self.websocket.receive(), self._keepalive_after_s)
            except asyncio.TimeoutError:
                return Keepalive()
        self._heard_at = time.monotonic()
        if message["type"] == "websocket.disconnect":
            return None
        text = message.get("text")
        if text is None:
            raise BadMessage(binary_refusal)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_message_bytes:
            raise TooLarge(f"message of {size} bytes; the limit is {self.limits.max_message_bytes}")
        return str(text)
