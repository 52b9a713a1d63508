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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from gateway.audio import Encoding, encode
from gateway.client.base import Credentials, open_socket

PATH = "/v1/dictation"


class DictationClient:
    def __init__(self, socket: ClientConnection, ready: dict[str, Any], sample_rate: int, encoding: Encoding) -> None:
        self.socket = socket
        self.ready = ready
        self.sample_rate = sample_rate
        self.encoding = encoding
        self.close_code: int | None = None
        self.close_reason: str = ""

    @classmethod
    async def connect(cls, base_url: str, *, sample_rate: int | None = 16000, encoding: Encoding = Encoding.S16LE,
                      language: str | None = None, interim: bool | None = None,
                      word_timestamps: bool | None = None, silence_ms: int | None = None,
                      eager: bool | None = None, terms: list[str] | None = None,
                      credentials: Credentials | None = None, open_timeout_s: float = 10.0) -> DictationClient:
        """Open the socket and wait for ``ready``. Raises ``DictationRefused`` if the
        server closes instead (bad parameter, over capacity, ASR unavailable, auth).
        ``sample_rate=None`` sends none: the server's default, or the rate a stream
        that carries its own (webm, ogg) names; ``ready`` says which. ``terms``: words the
        recognizer should expect (names, products, jargon; no commas)."""
        params = {"sample_rate": sample_rate, "encoding": encoding.value, "language": language,
                  "interim": interim, "word_timestamps": word_timestamps, "silence_ms": silence_ms,
                  "eager": eager, "terms": ",".join(terms) if terms else None}
        socket = await open_socket(base_url, PATH, params, credentials, open_timeout_s)
        errors: list[dict[str, Any]] = []
        try:
            while True:
                raw = await asyncio.wait_for(socket.recv(), open_timeout_s + 30)
                message = json.loads(raw)
                if message.get("type") == "ready":
                    return cls(socket, message, sample_rate or int(message["sample_rate"]), encoding)
                errors.append(message)
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            raise DictationRefused(rcvd.code if rcvd else None, rcvd.reason if rcvd else "", errors) from None

    async def __aenter__(self) -> DictationClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.socket.close()

    async def send_audio(self, data: bytes) -> None:
        await self.socket.send(data)

    async def send_json(self, message: dict[str, Any]) -> None:
        await self.socket.send(json.dumps(message))

    async def set_terms(self, terms: list[str]) -> None:
        """The words the recognizer should expect from now on ([] clears them)."""
        await self.send_json({"type": "config", "terms": terms})

    async def finalize(self) -> None:
        await self.send_json({"type": "finalize"})

    async def end(self) -> None:
        await self.send_json({"type": "end"})

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
            try:
                raw = await asyncio.wait_for(self.socket.recv(), timeout_s)
            except ConnectionClosed as exc:
                if exc.rcvd is not None:
                    self.close_code, self.close_reason = exc.rcvd.code, exc.rcvd.reason
                return
            if isinstance(raw, bytes):
                continue
            event = json.loads(raw)
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
