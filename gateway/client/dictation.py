"""Async client for /v1/dictation (used by ``voxgate transcribe``, tests and the benchmark).

    async with await DictationClient.connect("http://127.0.0.1:8000") as client:
        await client.send_audio(pcm_bytes)
        await client.end()
        async for event in client.events():
            ...

``events()`` yields the server's JSON events as dicts, in order, and ends after
``closed`` or when the socket closes (``close_code`` / ``close_reason`` then
say why). ``stream_samples`` sends float32 audio in chunks, paced in real time
or as fast as the socket takes it.

With ``resume=True`` the session is opened ``resumable`` and survives a drop
transparently: when the socket breaks (no close frame, a ping unanswered for
``ping_s``, or the server's 4408 for a socket that stopped reading) the client
reconnects with the token of the latest ``ready`` and the last ``seq`` it
yielded, sends again the audio the server had not received (from its
``AudioBacklog``, gateway/client/resume.py) and an ``end`` it had sent, and
``events()`` goes on without a repeated or missing event. ``resumes`` counts
the reconnects. A resume the server refuses raises ``ResumeFailed``; a session
that ended while the client was away yields its last events, then ends with
the server's error and close. The send and the read may both notice a drop;
one reconnect serves both. A ticket credential is single-use: a resumable
client uses the API key or a session token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from gateway.audio import Encoding, encode
from gateway.client.base import Credentials, open_socket
from gateway.client.resume import DROP_CLOSES, MAX_BACKLOG_BYTES, AudioBacklog, ResumeFailed, reconnect

PATH = "/v1/dictation"
RESUME_PING_S = 2.0  # a resumable client notices a path that went silent this soon


@dataclass
class ResumeState:
    """Where a resumable session stands, for the next reconnect."""

    base_url: str
    credentials: Credentials | None
    token: str
    within_s: float
    ping_s: float
    backlog: AudioBacklog
    last_seq: int = 0
    end_sent: bool = False
    ended: bool = False  # the server's resumed ready said the session had ended
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class DictationClient:
    def __init__(self, socket: ClientConnection, ready: dict[str, Any], sample_rate: int, encoding: Encoding,
                 resume: ResumeState | None = None) -> None:
        self.socket = socket
        self.ready = ready
        self.sample_rate = sample_rate
        self.encoding = encoding
        self.close_code: int | None = None
        self.close_reason: str = ""
        self.resume = resume
        self.resumes = 0  # reconnects so far
        self.resumed_at: float | None = None  # time.monotonic() of the latest reconnect's ready

    @classmethod
    async def connect(cls, base_url: str, *, sample_rate: int | None = 16000, encoding: Encoding = Encoding.S16LE,
                      language: str | None = None, interim: bool | None = None,
                      word_timestamps: bool | None = None, silence_ms: int | None = None,
                      eager: bool | None = None, terms: list[str] | None = None,
                      credentials: Credentials | None = None,
                      open_timeout_s: float = 10.0, resume: bool = False, resume_within_s: float = 30.0,
                      max_backlog_bytes: int = MAX_BACKLOG_BYTES,
                      ping_s: float = RESUME_PING_S) -> DictationClient:
        """Open the socket and wait for ``ready``. Raises ``DictationRefused`` if the
        server closes instead (bad parameter, over capacity, ASR unavailable, auth).
        ``sample_rate=None`` sends none: the server's default, or the rate a stream
        that carries its own (webm, ogg) names; ``ready`` says which. ``terms``: words the
        recognizer should expect (names, products, jargon; no commas)."""
        params = {"sample_rate": sample_rate, "encoding": encoding.value, "language": language,
                  "interim": interim, "word_timestamps": word_timestamps, "silence_ms": silence_ms,
                  "eager": eager, "terms": ",".join(terms) if terms else None,
                  "resumable": True if resume else None}
        socket = await open_socket(base_url, PATH, params, credentials, open_timeout_s,
                                   ping_s=ping_s if resume else None)
        errors: list[dict[str, Any]] = []
        try:
            while True:
                raw = await asyncio.wait_for(socket.recv(), open_timeout_s + 30)
                message = json.loads(raw)
                if message.get("type") == "ready":
                    state = None if not resume else ResumeState(
                        base_url, credentials, message["resume_token"], resume_within_s, ping_s,
                        AudioBacklog(max_backlog_bytes))
                    return cls(socket, message, sample_rate or int(message["sample_rate"]), encoding, state)
                errors.append(message)
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            raise DictationRefused(rcvd.code if rcvd else None, rcvd.reason if rcvd else "", errors) from None

    async def __aenter__(self) -> DictationClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.socket.close()

    async def send_audio(self, data: bytes) -> None:
        if self.resume is not None:
            self.resume.backlog.add(data)  # before the send: a resume sends it again if it was lost
        await self._send(data)

    async def send_json(self, message: dict[str, Any]) -> None:
        await self._send(json.dumps(message))

    async def set_terms(self, terms: list[str]) -> None:
        """The words the recognizer should expect from now on ([] clears them)."""
        await self.send_json({"type": "config", "terms": terms})

    async def finalize(self) -> None:
        await self.send_json({"type": "finalize"})

    async def end(self) -> None:
        if self.resume is not None:
            self.resume.end_sent = True
        await self.send_json({"type": "end"})

    async def _send(self, message: bytes | str) -> None:
        socket = self.socket
        try:
            await socket.send(message)
        except ConnectionClosed as exc:
            if self.resume is None or not _is_drop(exc):
                raise
            await self._reconnect(socket)  # sends again what the server lacks, this message included

    async def _reconnect(self, broken: ClientConnection) -> None:
        """Resume the session on a new socket (once, however many callers saw ``broken`` fail)."""
        state = self.resume
        assert state is not None
        async with state.lock:
            if self.socket is not broken or state.ended:
                return
            with contextlib.suppress(Exception):
                await broken.close()
            socket, ready = await reconnect(state.base_url, PATH, state.token, state.last_seq, state.credentials,
                                            state.within_s, state.ping_s)
            self.resumes += 1
            self.resumed_at = time.monotonic()
            if ready.get("ended"):
                state.ended = True
                self.socket = socket
                return
            resend = state.backlog.since(int(ready["resume_audio_bytes"]))
            if resend is None:
                await socket.close()
                raise ResumeFailed(f"the server lacks audio from byte {ready['resume_audio_bytes']} on, which this "
                                   f"client no longer keeps (it keeps {state.backlog.max_bytes} bytes)")
            state.token = ready["resume_token"]
            for data in resend:
                await socket.send(data)
            if state.end_sent:
                await socket.send(json.dumps({"type": "end"}))
            self.socket = socket

    async def stream_samples(self, samples: np.ndarray, *, chunk_ms: int = 100, realtime: bool = True,
                             on_chunk_sent: Any = None) -> None:
        """Send float32 samples at ``sample_rate`` in ``chunk_ms`` chunks; ``realtime``
        paces them on the wall clock like a microphone would."""
        step = max(1, self.sample_rate * chunk_ms // 1000)
        started = time.monotonic()
        for index in range(0, len(samples), step):
            if realtime:
                due = started + index / self.sample_rate
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            await self.send_audio(encode(samples[index:index + step], self.encoding))
            if on_chunk_sent is not None:
                on_chunk_sent(min(len(samples), index + step) / self.sample_rate)

    async def events(self, timeout_s: float = 120.0) -> AsyncIterator[dict[str, Any]]:
        """Yield events until ``closed`` or the socket closes; each wait is bounded."""
        while True:
            socket = self.socket
            try:
                raw = await asyncio.wait_for(socket.recv(), timeout_s)
            except ConnectionClosed as exc:
                if self.resume is not None and _is_drop(exc) and not self.resume.ended:
                    await self._reconnect(socket)
                    continue
                if exc.rcvd is not None:
                    self.close_code, self.close_reason = exc.rcvd.code, exc.rcvd.reason
                return
            if isinstance(raw, bytes):
                continue
            event = json.loads(raw)
            if self.resume is not None and "seq" in event:
                if event["seq"] <= self.resume.last_seq:
                    continue  # read from the old socket and given again after the resume
                self.resume.last_seq = event["seq"]
            yield event
            if event.get("type") == "closed":
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.socket.wait_closed(), 5)
                self.close_code, self.close_reason = self.socket.close_code, self.socket.close_reason or ""
                return


class DictationRefused(Exception):
    """The server closed the socket before ``ready``."""

    def __init__(self, code: int | None, reason: str, events: list[dict[str, Any]]) -> None:
        detail = "; ".join(e.get("message", "") for e in events if e.get("type") == "error")
        super().__init__(f"dictation refused (close {code}{': ' + reason if reason else ''})"
                         + (f": {detail}" if detail and detail != reason else ""))
        self.code = code
        self.reason = reason
        self.events = events


def _is_drop(exc: ConnectionClosed) -> bool:
    """Whether the server may still hold the session (the path broke, or it stopped
    a socket that did not read), rather than having closed it on purpose."""
    return (exc.rcvd.code if exc.rcvd is not None else None) in DROP_CLOSES
