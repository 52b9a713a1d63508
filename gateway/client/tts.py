"""Async client for the /v1/tts socket.

    async with await TtsClient.connect("http://127.0.0.1:8000", credentials=Credentials(api_key=key)) as tts:
        await tts.speak("Hello there.")
        result = await tts.collect()        # audio bytes + the start and end events
        await tts.close()                    # sends "end", waits for "closed"

Or event by event: ``await tts.receive()`` returns ``bytes`` (one PCM frame) or
a ``dict`` (a JSON event). Every wait takes a timeout.

With ``resume=True`` the session is opened ``resumable`` and survives a drop
transparently: when the socket breaks (no close frame, a ping unanswered for
``ping_s``, or the server's 4408 for a socket that stopped reading) ``receive``
reconnects with the token of the latest ``ready`` and the number of the last
message it returned, sends again the messages the server had not read (it
keeps the last ``MAX_SENT_KEPT``), and goes on with the next message: no frame
is repeated or missing. It acknowledges every ``ACK_EVERY`` messages, so the
server keeps little. A send that meets a broken socket is kept for the next
``receive`` to resend. ``resumes`` counts the reconnects; a resume the server
refuses raises ``ResumeFailed``. A ticket credential is single-use: a
resumable client uses the API key or a session token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from gateway.client.base import DEFAULT_OPEN_TIMEOUT_S, Credentials, open_socket
from gateway.client.resume import DROP_CLOSES, ResumeFailed, reconnect

PATH = "/v1/tts"
DEFAULT_TIMEOUT_S = 60.0
RESUME_PING_S = 2.0  # a resumable client notices a path that went silent this soon
ACK_EVERY = 32  # messages between two acks (about 2.5 s of 80 ms frames)
MAX_SENT_KEPT = 256  # client messages kept to send again after a resume


@dataclass
class TtsResume:
    """Where a resumable session stands, for the next reconnect."""

    base_url: str
    credentials: Credentials | None
    token: str
    within_s: float
    ping_s: float
    last_seq: int = 0  # the number of the last message ``receive`` returned
    acked: int = 0
    sent: int = 0  # client messages sent over the session (acks not counted)
    kept: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=MAX_SENT_KEPT))
    ended: bool = False  # the server's resumed ready said the session had ended


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
        self.resume: TtsResume | None = None
        self.resumes = 0  # reconnects so far
        self.resumed_at: float | None = None  # time.monotonic() of the latest reconnect's ready

    @classmethod
    async def connect(cls, base_url: str, *, credentials: Credentials | None = None, engine: str | None = None,
                      voice: str | None = None, sample_rate: int | None = None, encoding: str | None = None,
                      open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S, resume: bool = False,
                      ping_s: float | None = None, resume_within_s: float = 30.0) -> TtsClient:
        """Open the socket and wait for ``ready``. Raises ``TtsClosed`` if the server
        refuses (the reason says why) or ``TtsError`` for a refusal that came as an event.
        ``resume``: survive drops (module docstring), reconnecting for at most
        ``resume_within_s``; ``ping_s``: how soon a silent path counts as broken."""
        params = {"engine": engine, "voice": voice, "sample_rate": sample_rate, "encoding": encoding,
                  "resumable": True if resume else None}
        if resume and ping_s is None:
            ping_s = RESUME_PING_S
        ws = await open_socket(base_url, PATH, params, credentials, open_timeout_s, ping_s=ping_s)
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
        if resume:
            client.resume = TtsResume(base_url, credentials, first["resume_token"], resume_within_s,
                                      ping_s or RESUME_PING_S)
            ws.close_timeout = client.resume.ping_s  # a broken path answers no close: give up on it as soon
        return client

    async def __aenter__(self) -> TtsClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.ws.close()

    # ---- sending

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message)
        resume = self.resume
        if resume is None:
            await self.ws.send(text)
            return
        resume.sent += 1
        resume.kept.append((resume.sent, text))
        with contextlib.suppress(ConnectionClosed):  # the next receive reconnects and sends it again
            await self.ws.send(text)

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
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                message = await asyncio.wait_for(self.ws.recv(), max(0.0, deadline - time.monotonic()))
            except ConnectionClosed as exc:
                rcvd = exc.rcvd
                code = rcvd.code if rcvd else None
                if self.resume is None or self.resume.ended or code not in DROP_CLOSES:
                    raise TtsClosed(code, rcvd.reason if rcvd else "connection lost") from None
                await self._reconnect(self.resume)
                continue
            if self.resume is not None:
                await self._count(self.resume, message)
            if isinstance(message, bytes):
                return message
            event: dict[str, Any] = json.loads(message)
            return event

    async def _count(self, resume: TtsResume, message: str | bytes) -> None:
        """Number ``message`` as the server did, and acknowledge now and then."""
        resume.last_seq += 1
        if resume.last_seq - resume.acked >= ACK_EVERY:
            resume.acked = resume.last_seq
            with contextlib.suppress(ConnectionClosed):  # a broken socket: the next receive resumes
                await self.ws.send(json.dumps({"type": "ack", "seq": resume.last_seq}))

    async def _reconnect(self, resume: TtsResume) -> None:
        socket, ready = await reconnect(resume.base_url, PATH, resume.token, resume.last_seq, resume.credentials,
                                        resume.within_s, resume.ping_s)
        socket.close_timeout = resume.ping_s
        self.ws, self.resumes, self.resumed_at = socket, self.resumes + 1, time.monotonic()
        resume.acked = resume.last_seq
        if ready.get("ended"):
            resume.ended = True  # what the session kept comes next, then its close
            return
        resume.token = ready["resume_token"]
        received = int(ready["messages_received"])
        if resume.sent > received:
            if not resume.kept or resume.kept[0][0] > received + 1:
                await socket.close()
                raise ResumeFailed(f"the server read {received} of the {resume.sent} messages sent, and this client "
                                   f"no longer keeps the ones after it (it keeps {MAX_SENT_KEPT})")
            for number, text in list(resume.kept):
                if number > received:
                    with contextlib.suppress(ConnectionClosed):
                        await socket.send(text)

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
                     timeout_s: float = DEFAULT_TIMEOUT_S, resume: bool = False) -> tuple[bytes, dict[str, Any]]:
    """Open a socket, synthesize ``text`` and close: (PCM bytes, the ``ready`` event).
    Raises ``TtsError`` / ``TtsClosed`` with the server's reason (``resume``: survive drops)."""
    async with await TtsClient.connect(base_url, credentials=credentials, voice=voice, sample_rate=sample_rate,
                                       encoding=encoding, resume=resume) as tts:
        utt = await tts.synthesize(text, seed=seed, timeout_s=timeout_s)
        await tts.close(timeout_s)
        return utt.audio, tts.ready
