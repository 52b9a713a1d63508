"""The /v1/tts transport of a resumable session (``resumable=true``): a session
that outlives its socket.

Every message after ``ready`` is numbered and kept (gateway/tts/kept.py) until
the client acknowledges it. When the socket drops (it closes without ``end``,
a send fails or does not finish within ``stall_s``) the session is *away*: its
synthesis goes on into the kept messages until they are full, then the sender
waits, which pauses the synthesis (nothing is dropped); ``receive`` waits up to
``grace_s`` for the client to come back. A resume (gateway/resume_tokens.py)
``attach``\\ es the new socket: a new ``ready`` (``resumed``, a new token, how
many client messages the server read), the messages after the client's
``last_seq``, then the session goes on there. A resume that arrives while the
old socket still looks open takes over: the old one is closed 4409.

When the grace passes with the client away, ``receive`` answers None and the
sender gives up: the session ends, and what it kept stays retrievable once by
the token for another grace (``deliver_kept``).

Runs on the event loop only; every send and the attach hold one lock, so a
replay never interleaves with a new message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.errors import BadMessage, BadRequest, GatewayError, close_code_for, close_socket
from gateway.protocol.tts import Ack, ClientMessage, TextLimits
from gateway.resume_tokens import REPLACED, close_collected, receive_unless_over, send_unless_over
from gateway.tts.kept import KeptMessages, Payload
from gateway.tts.transport import NativeTtsTransport

KEPT_PER_SESSION = 1  # ended sessions kept for their tokens, per allowed TTS session
ABANDON_TIMEOUT_S = 1.0  # closing a socket the session leaves: best effort, it may be half-open


class Link:
    """One socket of a resumable session; ``over`` is done once the session no longer uses it."""

    def __init__(self, websocket: WebSocket, limits: TextLimits) -> None:
        self.websocket = websocket
        self.native = NativeTtsTransport(websocket, limits, acks=True)
        self.over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def finish(self) -> None:
        if not self.over.done():
            self.over.set_result(None)


class ResumableTtsTransport:
    def __init__(self, websocket: WebSocket, limits: TextLimits, *, owner: str, grace_s: float, stall_s: float,
                 issue_token: Callable[[ResumableTtsTransport], str], kept: KeptMessages | None = None) -> None:
        self.owner = owner  # who may resume it (gateway/resume_tokens.py, ``principal_owner``)
        self.grace_s = grace_s
        self.stall_s = stall_s
        self.token_hash: str | None = None  # the store's key of the live token (never the token itself)
        self.kept = kept or KeptMessages()
        self.received = 0  # client messages read over every socket (acks not counted)
        self.expired = False  # the grace passed with the client away: the session ended
        self.closed_with: tuple[int, str] | None = None  # how the session closed, for a late resume
        self.limits = limits
        self._issue_token = issue_token
        self._link: Link | None = Link(websocket, limits)
        self._changed = asyncio.Event()  # replaced after every attach, drop and ack; waiters re-check
        self._lock = asyncio.Lock()
        self._dropped_at = 0.0
        self._ready: dict[str, Any] = {}

    @property
    def away(self) -> bool:
        """No socket: the session waits for its client to resume."""
        return self._link is None

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def send_ready(self, ready: dict[str, Any]) -> None:
        """The session's first ``ready``, with its first resume token."""
        self._ready = ready
        link = self._link
        if link is not None:
            await link.websocket.send_text(_dumps({**ready, "resume_token": self._issue_token(self)}))

    # ---- client -> server

    async def receive(self) -> ClientMessage | None:
        while True:
            link = self._link
            if link is None:
                if not await self._wait_back():
                    self.expired = True
                    return None
                continue
            got = await self._receive_on(link)
            if got is REPLACED:
                continue
            if got is None:
                await self._drop(link)
                continue
            if isinstance(got, Ack):
                self._ack(got.seq)
                continue
            self.received += 1
            return got  # type: ignore[return-value]

    async def _receive_on(self, link: Link) -> object:
        try:
            return await receive_unless_over(link.native.receive(), link.over)
        except GatewayError:  # a message it cannot use: counted, then refused
            self.received += 1
            raise

    def _ack(self, seq: int) -> None:
        if seq > self.kept.newest:
            raise BadMessage(f"ack.seq: {seq} is beyond the last message this session sent ({self.kept.newest})")
        self.kept.ack(seq)
        self._signal()

    async def _wait_back(self) -> bool:
        """Wait for a resume until the grace after the drop passes; whether one came."""
        loop = asyncio.get_running_loop()
        while self._link is None:
            remaining = self._dropped_at + self.grace_s - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    # ---- server -> client

    async def send_audio(self, data: bytes) -> None:
        await self._send(lambda seq: data, len(data))

    async def send_event(self, event: dict[str, Any]) -> None:
        await self._send(lambda seq: _dumps({**event, "seq": seq}), len(_dumps(event)) + 24)

    async def _send(self, payload_for: Callable[[int], Payload], size: int) -> None:
        """Number, keep and (when a socket is attached) send one message. Waits while
        the kept messages are full; raises ``WebSocketDisconnect`` when the client
        stayed away past the grace."""
        await self._wait_room(size)
        async with self._lock:
            payload = payload_for(self.kept.newest + 1)
            seq = self.kept.add(payload, attached=self._link is not None)
            link = self._link
            if link is not None:
                if await self._send_on(link, [payload], self.stall_s):
                    self.kept.sent(seq)
                else:
                    await self._drop(link)

    async def _wait_room(self, size: int) -> None:
        while not self.kept.has_room(size, attached=self._link is not None):
            link = self._link
            if link is None:
                if not await self._wait_back():
                    self.expired = True
                    raise WebSocketDisconnect(close_code_for("resume_expired"))
                continue
            try:  # an acking client is behind by the whole window: its next ack makes room
                await asyncio.wait_for(self._changed.wait(), self.stall_s)
            except asyncio.TimeoutError:
                await self._drop(link)

    async def _send_on(self, link: Link, payloads: list[Payload], timeout_s: float) -> bool:
        """True when every payload was handed to the socket; False when a send failed,
        timed out or the socket was replaced (the attach resends from the kept ones)."""
        for payload in payloads:
            send = (link.websocket.send_bytes(payload) if isinstance(payload, bytes)
                    else link.websocket.send_text(payload))
            if not await send_unless_over(send, link.over, timeout_s):
                return False
        return True

    async def _drop(self, link: Link) -> None:
        """The client is gone from ``link``: wait for it for the grace."""
        if self._link is not link:
            return
        self._link = None
        self._dropped_at = asyncio.get_running_loop().time()
        link.finish()
        self._signal()
        await close_socket(link.websocket, close_code_for("idle_timeout"),
                           "not reading; resume with the latest resume_token", ABANDON_TIMEOUT_S)

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        async with self._lock:
            self.closed_with = (code, reason)
            link = self._link
            if link is not None:
                await close_socket(link.websocket, code, reason, timeout_s)
                link.finish()

    def release(self) -> None:
        """The session is over: whatever socket it had is no longer used."""
        if self._link is not None:
            self._link.finish()

    # ---- resuming

    def check_resume(self, last_seq: int) -> None:
        """Raise the refusal of a resume after ``last_seq`` (nothing is changed)."""
        if last_seq > self.kept.newest:
            raise BadRequest(f"last_seq: {last_seq} is beyond the last message this session sent "
                             f"({self.kept.newest})")
        if self.kept.after(last_seq) is None:
            raise GatewayError(f"the messages after {last_seq} are no longer kept (the oldest kept is "
                               f"{self.kept.oldest}); open a new session", code="resume_lost")

    def _resumed_ready(self, token: str | None) -> str:
        ready = {**self._ready, "resumed": True, "last_seq": self.kept.newest, "messages_received": self.received}
        if token is not None:
            ready["resume_token"] = token
        else:
            ready["ended"] = True
        return _dumps(ready)

    async def attach(self, websocket: WebSocket, last_seq: int, token: str) -> Link:
        """Continue on ``websocket``: ``ready``, the messages after ``last_seq``, then
        the session's own. The returned link's ``over`` is done when the session
        leaves the socket."""
        old = self._link
        if old is not None:  # the old socket looked open: it stopped forwarding without a close
            self._link = None
            self._dropped_at = asyncio.get_running_loop().time()
            old.finish()  # its pending receive and send give up at once
        link = Link(websocket, self.limits)
        async with self._lock:
            if old is not None:
                await close_socket(old.websocket, close_code_for("resume_used"),
                                   "resumed on another connection", ABANDON_TIMEOUT_S)
            self.kept.ack(last_seq, explicit=False)
            if not await self._send_on(link, [self._resumed_ready(token), *(self.kept.after(last_seq) or [])],
                                       self.stall_s):
                link.finish()
                return link
            self.kept.sent(self.kept.newest)
            if self.closed_with is not None:  # the session ended while this resume was being answered
                await close_socket(websocket, *self.closed_with)
                link.finish()
                return link
            self._link = link
            self._signal()
        return link

    async def deliver_kept(self, websocket: WebSocket, last_seq: int) -> None:
        """The session ended while its client was away: ``ready`` (``ended``), the
        messages after ``last_seq``, then how it ended."""
        link = Link(websocket, self.limits)
        await self._send_on(link, [self._resumed_ready(None), *(self.kept.after(last_seq) or [])], self.grace_s)
        error = None
        if self.expired:
            error = GatewayError(f"the session ended: the client was away for more than {self.grace_s:g} s; "
                                 "what it kept is above; open a new session", code="resume_expired")
        await close_collected(websocket, error, self.closed_with, self.grace_s)


def _dumps(data: dict[str, Any]) -> str:
    # ASCII JSON: its length is its size in bytes, which the kept messages count
    return json.dumps(data, separators=(",", ":"))
