"""The native dictation transport of a resumable session (``resumable=true``):
a session that outlives its socket.

Every event after ``ready`` goes out with a ``seq`` (1, 2, ... over the whole
session) and is kept in the session's ``EventLog``. When the socket drops (it
closes without ``end``, a ping times out, a send fails or the client stops
reading for ``idle_timeout_s``) the session is *away*: the recognizer goes on,
its events are kept (none dropped: past the log's cap the session ends), and
``receive`` waits up to ``grace_s`` for the client to come back. A resume
(gateway/resume_tokens.py) ``attach``\\ es the new socket: a new ``ready``
(``resumed``, a new token, where the client's audio should resume), the events
after the client's ``last_seq``, then the session goes on there. A resume that
arrives while the old socket still looks open (it stopped forwarding without a
close) takes over: the old one is closed.

When the grace passes with the client away, ``receive`` answers ``End``: the
session finalizes what it read, and its results stay retrievable once by the
token for another grace (``deliver_kept``).

Runs on the event loop only; every send and the attach hold one lock, so a
replay never interleaves with a new event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from gateway.codecs.formats import InputEncoding
from gateway.dictation.event_log import EventLog
from gateway.dictation.transport import NativeDictationTransport
from gateway.errors import BadRequest, GatewayError, close_code_for, close_socket
from gateway.protocol.common import End
from gateway.protocol.dictation import ClientMessage, Ready, ServerEvent
from gateway.resume_tokens import REPLACED, close_collected, receive_unless_over, send_unless_over

# bytes of one sample of the encodings whose bytes are time (Opus and containers are not)
SAMPLE_BYTES = {InputEncoding.PCM_S16LE: 2, InputEncoding.PCM_F32LE: 4, InputEncoding.MULAW: 1,
                InputEncoding.ALAW: 1}
ABANDON_TIMEOUT_S = 1.0  # closing a socket the session leaves: best effort, it may be half-open
KEPT_PER_STREAM = 4  # ended sessions kept for their tokens, per allowed dictation stream


class Link:
    """One socket of a resumable session; ``over`` is done once the session no longer uses it."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.native = NativeDictationTransport(websocket)
        self.over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def finish(self) -> None:
        if not self.over.done():
            self.over.set_result(None)


class ResumableTransport:
    def __init__(self, websocket: WebSocket, *, owner: str, grace_s: float, encoding: InputEncoding,
                 sample_rate: int, issue_token: Callable[[ResumableTransport], str],
                 log: EventLog | None = None) -> None:
        self.owner = owner  # who may resume it (gateway/resume_tokens.py, ``principal_owner``)
        self.grace_s = grace_s
        self.token_hash: str | None = None  # the store's key of the live token (never the token itself)
        self.log = log or EventLog()
        self.seq = 0  # the last number given out
        self.received_bytes = 0  # audio bytes the session took from its client, over every socket
        self.expired = False  # the grace passed with the client away: the session ended
        self.lost = False  # an event could not be kept: the session ended
        self.closed_with: tuple[int, str] | None = None  # how the session closed, for a late resume
        self._issue_token = issue_token
        self._bytes_per_s = SAMPLE_BYTES[encoding] * sample_rate if encoding in SAMPLE_BYTES else None
        self._link: Link | None = Link(websocket)
        self._back = asyncio.Event()  # set when a socket is attached (or the session can wait no longer)
        self._lock = asyncio.Lock()
        self._unsent_from: int | None = None  # away: the first seq no socket was given
        self._dropped_at = 0.0
        self._ready: dict[str, Any] = {}

    @property
    def away(self) -> bool:
        """No socket: the session waits for its client to resume."""
        return self._link is None

    @property
    def resume_audio_offset_s(self) -> float | None:
        """Where the client's resent audio must start, in seconds (None: Opus and
        containers, whose bytes are not time: ``received_bytes`` says it)."""
        return None if self._bytes_per_s is None else round(self.received_bytes / self._bytes_per_s, 6)

    # ---- client -> server

    async def receive(self) -> bytes | ClientMessage | None:
        while True:
            link = self._link
            if link is None:
                if not await self._wait_back():  # a lost session sets ``_back``: no wait then
                    if self.lost:
                        return None
                    self.expired = True
                    return End()  # finalize what was read; the finals are kept for the token
                continue
            got = await self._receive_on(link)
            if got is REPLACED:
                continue
            if got is None:
                await self._drop(link, self.seq + 1)
                continue
            if isinstance(got, bytes):
                self.received_bytes += len(got)
            return got  # type: ignore[return-value]

    async def _receive_on(self, link: Link) -> object:
        return await receive_unless_over(link.native.receive(), link.over)

    async def _wait_back(self) -> bool:
        remaining = self._dropped_at + self.grace_s - asyncio.get_running_loop().time()
        if remaining > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._back.wait(), remaining)
        return self._link is not None

    # ---- server -> client

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        async with self._lock:
            if self.lost:
                return  # the session is ending: what it sends now could not be kept either
            if isinstance(event, Ready):
                self._ready = event.to_dict()
                text = _dumps({**self._ready, "resume_token": self._issue_token(self)})
            else:
                self.seq += 1
                text = _dumps({**event.to_dict(), "seq": self.seq})
                if not self.log.add(self.seq, text, self._unsent_from):
                    self.seq -= 1  # the numbers stay those of the kept events
                    self.lost = True
                    self._back.set()  # a receive waiting for the client ends the session now
                    return
            link = self._link
            if link is not None and not await self._send_on(link, text, timeout_s):
                await self._drop(link, self.seq)

    async def _send_on(self, link: Link, text: str, timeout_s: float) -> bool:
        """True when ``text`` was handed to the socket; False when it failed, timed
        out or the socket was replaced (the attach resends from the log then)."""
        return await send_unless_over(link.websocket.send_text(text), link.over, timeout_s)

    async def _drop(self, link: Link, unsent_from: int) -> None:
        """The client is gone from ``link``: wait for it for the grace."""
        if self._link is not link:
            return
        self._link = None
        self._back.clear()
        self._unsent_from = unsent_from
        self._dropped_at = asyncio.get_running_loop().time()
        link.finish()
        await close_socket(link.websocket, close_code_for("idle_timeout"),
                           "not reading; resume with the latest resume_token", ABANDON_TIMEOUT_S)

    async def close(self, code: int, reason: str) -> None:
        async with self._lock:
            self.closed_with = (code, reason)
            link = self._link
            if link is not None:
                await close_socket(link.websocket, code, reason)
                link.finish()

    def release(self) -> None:
        """The session is over: whatever socket it had is no longer used."""
        if self._link is not None:
            self._link.finish()

    # ---- resuming

    def check_resume(self, last_seq: int) -> None:
        """Raise the refusal of a resume after ``last_seq`` (nothing is changed)."""
        if last_seq > self.seq:
            raise BadRequest(f"last_seq: {last_seq} is beyond the last event this session sent ({self.seq})")
        if self.log.after(last_seq, self.seq) is None:
            raise GatewayError(f"the events after {last_seq} are no longer kept; open a new session",
                               code="resume_lost")

    def _resumed_ready(self, token: str | None) -> dict[str, Any]:
        ready = {**self._ready, "resumed": True, "last_seq": self.seq, "resume_audio_bytes": self.received_bytes,
                 "resume_audio_offset_s": self.resume_audio_offset_s}
        if token is not None:
            ready["resume_token"] = token
        else:
            ready["ended"] = True
        return ready

    async def attach(self, websocket: WebSocket, last_seq: int, token: str) -> Link:
        """Continue on ``websocket``: ``ready``, the events after ``last_seq``, then
        the session's own. The returned link's ``over`` is done when the session
        leaves the socket."""
        old = self._link
        if old is not None:  # the old socket looked open: it stopped forwarding without a close
            self._link = None
            self._back.clear()
            self._unsent_from = self.seq + 1
            self._dropped_at = asyncio.get_running_loop().time()
            old.finish()  # its pending receive and send give up at once
        link = Link(websocket)
        async with self._lock:
            if old is not None:
                await close_socket(old.websocket, close_code_for("resume_used"),
                                   "resumed on another connection", ABANDON_TIMEOUT_S)
            missed = self.log.after(last_seq, self.seq) or []
            for text in [_dumps(self._resumed_ready(token)), *missed]:
                if not await self._send_on(link, text, self.grace_s):
                    self._dropped_at = asyncio.get_running_loop().time()
                    link.finish()
                    return link
            if self.closed_with is not None:  # the session ended while this resume was being answered
                await close_socket(websocket, *self.closed_with)
                link.finish()
                return link
            self._link = link
            self._unsent_from = None
            self._back.set()
        return link

    async def deliver_kept(self, websocket: WebSocket, last_seq: int) -> None:
        """The session ended while its client was away: ``ready`` (``ended``), the
        events after ``last_seq``, then how it ended."""
        for text in [_dumps(self._resumed_ready(None)), *(self.log.after(last_seq, self.seq) or [])]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(websocket.send_text(text), self.grace_s)
        error = None
        if self.lost or self.expired:
            code = "resume_lost" if self.lost else "resume_expired"
            why = ("its events passed the memory cap while the client was away" if self.lost
                   else f"the client was away for more than {self.grace_s:g} s")
            error = GatewayError(f"the session ended: {why}; its events are above; open a new session", code=code)
        await close_collected(websocket, error, self.closed_with, self.grace_s)


def _dumps(data: dict[str, Any]) -> str:
    # ASCII JSON: its length is its size in bytes, which the log counts
    return json.dumps(data, separators=(",", ":"))
