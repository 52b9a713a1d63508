"""What the dictation client needs to resume a dropped session
(docs/protocol.md, "Resuming a dropped session").

``AudioBacklog`` keeps the audio the client sent, by byte offset, so that
after a resume it can send again what the server had not received
(``ready.resume_audio_bytes``); it keeps at most ``max_bytes`` (oldest out), so
a drop longer than that backlog cannot be resumed without loss and says so.
``reconnect`` opens the resume socket with the session's token and the last
event seen, retrying until ``within_s`` has passed.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from gateway.client.base import Credentials, open_socket

MAX_BACKLOG_BYTES = 8 * 1024 * 1024  # ~4 min of 16 kHz PCM
RETRY_S = 0.2  # between attempts to reach the server again
# Closes after which a resume is worth trying: no close frame (the path broke), or
# the server gave up on a socket that stopped reading (it holds the session).
DROP_CLOSES = (None, 1006, 4408)


class AudioBacklog:
    def __init__(self, max_bytes: int = MAX_BACKLOG_BYTES) -> None:
        self.max_bytes = max_bytes
        self.sent = 0  # bytes sent over the session's life
        self.floor = 0  # the oldest offset still kept
        self._chunks: deque[tuple[int, bytes]] = deque()
        self._kept = 0

    def add(self, data: bytes) -> None:
        self._chunks.append((self.sent, data))
        self.sent += len(data)
        self._kept += len(data)
        while self._kept > self.max_bytes and len(self._chunks) > 1:
            _, old = self._chunks.popleft()
            self._kept -= len(old)
            self.floor = self._chunks[0][0]

    def since(self, offset: int) -> list[bytes] | None:
        """The messages to send again from ``offset`` on; None when that audio is no longer kept."""
        if offset < self.floor or offset > self.sent:
            return None
        return [data[max(0, offset - start):] for start, data in self._chunks if start + len(data) > offset]


class ResumeFailed(Exception):
    """The session could not be resumed: the server's refusal (``code``), or no server within the time."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


async def reconnect(base_url: str, path: str, token: str, last_seq: int, credentials: Credentials | None,
                    within_s: float, ping_s: float | None) -> tuple[ClientConnection, dict[str, Any]]:
    """The resumed socket and its ``ready``. Raises ``ResumeFailed`` with the
    server's code when it refuses, or when nothing answered within ``within_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    last_error = "no attempt"
    while loop.time() < deadline:
        remaining = deadline - loop.time()
        try:
            socket = await open_socket(base_url, path, {"resume": token, "last_seq": last_seq}, credentials,
                                       min(remaining, 10.0), ping_s=ping_s)
        except (OSError, EOFError, asyncio.TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
            last_error = str(exc) or type(exc).__name__
            await asyncio.sleep(min(RETRY_S, max(0.0, deadline - loop.time())))
            continue
        try:
            first = json.loads(await asyncio.wait_for(socket.recv(), max(1.0, deadline - loop.time())))
        except (ConnectionClosed, asyncio.TimeoutError) as exc:
            await socket.close()
            last_error = str(exc) or type(exc).__name__
            continue
        if first.get("type") == "ready":
            return socket, first
        await socket.close()
        raise ResumeFailed(f"resume refused: {first.get('code')}: {first.get('message')}", first.get("code"))
    raise ResumeFailed(f"the server could not be reached again within {within_s:g} s ({last_error})")
