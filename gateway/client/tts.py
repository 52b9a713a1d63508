"""Async client for the /v1/tts socket.

    async with await TtsClient.connect("http://127.0.0.1:8000", credentials=Credentials(api_key=key)) as tts:
        await tts.speak("Hello there.")
        result = await tts.collect()        # audio bytes + the start and end events
        await tts.close()                    # sends "end", waits for "closed"

Or event by event: ``await tts.receive()`` returns ``bytes`` (one PCM frame) or
a ``dict`` (a JSON event). Every wait takes a timeout.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from gateway.client.base import DEFAULT_OPEN_TIMEOUT_S, Credentials, open_socket

DEFAULT_TIMEOUT_S = 60.0


class TtsClosed(Exception):
    """The socket closed; ``code`` and ``reason`` say why."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"/v1/tts closed ({code}): {reason}")
        self.code = code
        self.reason = reason


class TtsError(Exception):
    """An ``error`` event the caller asked to treat as fatal."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__(f"{event.get('code')}: {event.get('message')}")
        self.event = event
        self.code = event.get("code")


@dataclass
class Utterance:
    """What one utterance produced, as the client saw it."""

    id: str | None
    audio: bytes = b""
    frames: int = 0
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    sent_at: float = 0.0  # when the request left (time.monotonic)
    first_frame_at: float | None = None  # when its first frame arrived
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ttfa_s(self) -> float | None:
        return None if self.first_frame_at is None else self.first_frame_at - self.sent_at


class TtsClient:
    """One /v1/tts socket. Not safe for concurrent use by several tasks."""

    def __init__(self, ws: ClientConnection, ready: dict[str, Any]) -> None:
        self.ws = ws
        self.ready = ready

    @classmethod
    async def connect(cls, base_url: str, *, credentials: Credentials | None = None, engine: str | None = None,
                      voice: str | None = None, sample_rate: int | None = None, encoding: str | None = None,
                      open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S) -> TtsClient:
        """Open the socket and wait for ``ready``. Raises ``TtsClosed`` if the server
        refuses (the reason says why) or ``TtsError`` for a refusal that came as an event."""
        params = {"engine": engine, "voice": voice, "sample_rate": sample_rate, "encoding": encoding}
        ws = await open_socket(base_url, "/v1/tts", params, credentials, open_timeout_s)
        client = cls(ws, {})
        first = await client.receive(open_timeout_s)
        if isinstance(first, dict) and first.get("type") == "error":
            refusal = TtsError(first)
            try:
                await client.receive(open_timeout_s)
            except TtsClosed as closed:
                refusal.close_code = closed.code  # type: ignore[attr-defined]
            raise refusal
        if not isinstance(first, dict) or first.get("type") != "ready":
            await ws.close()
            raise TtsClosed(None, f"expected a ready event, got {first!r:.80}")
        client.ready = first
        return client

    async def __aenter__(self) -> TtsClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.ws.close()

    # ---- sending

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def speak(self, text: str, *, id: str | None = None, voice: str | None = None,
                    seed: int | None = None) -> None:
        msg: dict[str, Any] = {"type": "speak", "text": text}
        for key, value in (("id", id), ("voice", voice), ("seed", seed)):
            if value is not None:
                msg[key] = value
        await self.send(msg)

    async def text(self, fragment: str) -> None:
        await self.send({"type": "text", "text": fragment})

    async def flush(self) -> None:
        await self.send({"type": "flush"})

    async def cancel(self) -> None:
        await self.send({"type": "cancel"})

    async def keepalive(self) -> None:
        await self.send({"type": "keepalive"})

    async def end(self) -> None:
        await self.send({"type": "end"})

    # ---- receiving

    async def receive(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes | dict[str, Any]:
        """The next message: ``bytes`` (a PCM frame) or a ``dict`` event. Raises
        ``TtsClosed`` once the socket is closed and ``TimeoutError`` after ``timeout_s``."""
        try:
            message = await asyncio.wait_for(self.ws.recv(), timeout_s)
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            raise TtsClosed(rcvd.code if rcvd else None, rcvd.reason if rcvd else "connection lost") from None
        if isinstance(message, bytes):
            return message
        event: dict[str, Any] = json.loads(message)
        return event

    async def collect(self, timeout_s: float = DEFAULT_TIMEOUT_S, *, sent_at: float | None = None,
                      raise_on_error: bool = True) -> Utterance:
        """Read one utterance: its ``start``, frames and ``end`` (or ``cancelled``).
        Events of no utterance (errors with ``raise_on_error`` False) are kept in ``events``."""
        utt = Utterance(id=None, sent_at=time.monotonic() if sent_at is None else sent_at)
        deadline = time.monotonic() + timeout_s
        chunks: list[bytes] = []
        while True:
            message = await self.receive(max(0.0, deadline - time.monotonic()))
            if isinstance(message, bytes):
                if utt.first_frame_at is None:
                    utt.first_frame_at = time.monotonic()
                chunks.append(message)
                utt.frames += 1
                continue
            kind = message.get("type")
            if kind == "start":
                utt.start, utt.id = message, message.get("id")
            elif kind in ("end", "cancelled"):
                utt.end = message
                utt.audio = b"".join(chunks)
                return utt
            elif kind == "error" and raise_on_error:
                raise TtsError(message)
            else:
                utt.events.append(message)

    async def synthesize(self, text: str, *, voice: str | None = None, seed: int | None = None,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> Utterance:
        """Speak ``text`` and return its audio once its ``end`` arrives."""
        sent_at = time.monotonic()
        await self.speak(text, voice=voice, seed=seed)
        return await self.collect(timeout_s, sent_at=sent_at)

    async def close(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any] | None:
        """Send ``end``, drain until ``closed`` and the close; returns the ``closed`` event."""
        await self.end()
        closed = None
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                message = await self.receive(max(0.0, deadline - time.monotonic()))
                if isinstance(message, dict) and message.get("type") == "closed":
                    closed = message
        except TtsClosed:
            return closed


async def speak_once(base_url: str, text: str, *, credentials: Credentials | None = None, voice: str | None = None,
                     seed: int | None = None, sample_rate: int | None = None, encoding: str | None = None,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[bytes, dict[str, Any]]:
    """Open a socket, synthesize ``text`` and close: (PCM bytes, the ``ready`` event).
    Raises ``TtsError`` / ``TtsClosed`` with the server's reason."""
    async with await TtsClient.connect(base_url, credentials=credentials, voice=voice, sample_rate=sample_rate,
                                       encoding=encoding) as tts:
        utt = await tts.synthesize(text, seed=seed, timeout_s=timeout_s)
        await tts.close(timeout_s)
        return utt.audio, tts.ready
