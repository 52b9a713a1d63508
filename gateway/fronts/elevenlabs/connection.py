"""One ElevenLabs text-to-speech socket: its reader, its contexts, its close.

The reader takes every client message (the first one already read by the
route when its in-band credential had to be settled first, sockets.py), judges
any credential a later message carries (auth/inband.py), and hands each
message to the context it names, opening the context (a ``TtsSession``, registered with
the session registry like every TTS session, so contexts count against the
same limits: the global one and the client's share) on its first message.
``stream-input`` has one context, ended by
``{"text": ""}``; the socket closes 1000 after its ``isFinal``.
``multi-stream-input`` runs up to five; ``{"text": "", "context_id"}`` keeps one
alive, ``close_context`` ends one (context.py), ``close_socket`` ends all and
then the socket.

Idle rules: a context's session closes it after ``inactivity_timeout`` with no
message and nothing to say (its ``isFinal`` is sent); a socket with no context
closes 4408 after the same time (counted from its last message, or from the end
of its last context, whichever came later). ``inactivity_timeout`` is at most the
gateway's idle timeout (params.py); the first socket that asks for more is logged.

The drain before a stop (``drain``; the route holds the socket in the session
registry, each context is a TTS session there): every context's session
speaks the text it was sent, its buffer flushed as if the input had ended,
then the context gets its ``isFinal``; new text and new contexts get a
``draining`` error; the socket closes 1001 once no context is left (at once
when none is open).

Longer than 300 lines on purpose: reading, dispatching and the contexts act on one socket's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import Any

from starlette.websockets import WebSocket

from auth import AuthState
from auth.inband import settle
from auth.policy import Refusal
from engines.base import TtsEngine
from gateway.errors import (
    CLOSE_TIMEOUT_S,
    Draining,
    GatewayError,
    OverCapacity,
    close_code_for,
    close_socket,
)
from gateway.fronts.elevenlabs.context import TEXT_NOT_TAKEN, Context, ContextTransport, Sender
from gateway.fronts.elevenlabs.messages import ClientMessage as ElevenLabsMessage
from gateway.fronts.elevenlabs.messages import error_message, final_message, parse_client_message
from gateway.fronts.elevenlabs.params import SocketParams
from gateway.protocol.common import End, Keepalive
from gateway.protocol.tts import ClientMessage, Flush, TextFragment, TextLimits
from gateway.registry import DRAINING_MESSAGE, SessionRegistry
from gateway.tts.session import TtsSession
from gateway.tts.states import GOING_AWAY_REASON, SessionConfig

log = logging.getLogger("voxgate.fronts.elevenlabs")

TEXT_LIMITS = TextLimits()
MAX_CONTEXTS = 5  # ElevenLabs' own limit per multi-context socket
DEFAULT_CONTEXT = "default"  # multi-stream-input messages that name no context
IDLE_TICK_S = 0.5  # how often a quiet socket checks its idle rules
CAPPED_TOPIC = "elevenlabs-inactivity-capped"  # logged once per process (AuthState.warning_due)


class Connection:
    def __init__(self, websocket: WebSocket, *, auth: AuthState, sessions: SessionRegistry, engine: TtsEngine,
                 voice: str | None, params: SocketParams, multi: bool, first: str | None = None) -> None:
        self.websocket = websocket
        self.auth = auth
        self.sessions = sessions
        self.engine = engine
        self.voice = voice
        self.params = self._within_idle_ceiling(params, websocket.state.settings.idle_timeout_s)
        self.multi = multi
        self.sender = Sender(websocket)
        self.contexts: dict[str | None, Context] = {}
        self._first = first  # the first message, read (and its credential settled) by the route
        self._close: tuple[int, str] | None = None
        self._closing_socket = False
        self._draining = False
        self._done = asyncio.Event()
        self._quiet_since = time.monotonic()  # the last message, or the end of the last context

    def _within_idle_ceiling(self, params: SocketParams, ceiling_s: float) -> SocketParams:
        capped = params.capped(ceiling_s)
        if capped.inactivity_capped and self.auth.warning_due(CAPPED_TOPIC, every_s=float("inf")):
            log.info("ElevenLabs sockets ask for inactivity_timeout=%d s; it is capped at VOXGATE_IDLE_TIMEOUT_S=%g s "
                     "(logged once)", params.requested_inactivity_s, ceiling_s)
        return capped

    # ---- lifecycle

    async def run(self) -> None:
        reader = asyncio.create_task(self._read_loop(), name="elevenlabs-read")
        finished = asyncio.create_task(self._done.wait(), name="elevenlabs-done")
        try:
            await asyncio.wait({reader, finished}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            tasks = [reader, finished, *(c.task for c in self.contexts.values() if c.task is not None)]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.error("ElevenLabs socket task failed", exc_info=task.exception())
            for context in list(self.contexts.values()):  # a task cancelled before it ran has not released its slot
                self.sessions.remove(context.entry.id)
            if self._close is not None:
                await close_socket(self.websocket, *self._close)

    def _finish(self, code: int, reason: str = "") -> None:
        if self._close is None:
            self._close = (code, reason)
        self._done.set()

    def drain(self, now: bool) -> None:
        """The server stops: the contexts finish (their sessions drain on their
        own), then the socket closes 1001."""
        self._draining = True
        if not self.contexts:
            self._finish(close_code_for("going_away"), GOING_AWAY_REASON)

    # ---- reading

    def _idle_close(self) -> tuple[int, str] | None:
        """The close a socket with no context is due after ``inactivity_timeout``
        without a message. Contexts keep their own time."""
        if not self.contexts and time.monotonic() - self._quiet_since >= self.params.inactivity_timeout_s:
            return close_code_for("idle_timeout"), self.params.idle_reason()
        return None

    async def _read_loop(self) -> None:
        receive: asyncio.Task[Any] | None = None
        if self._first is not None:
            await self._on_message({"type": "websocket.receive", "text": self._first}, settled=True)
        try:
            while not self._done.is_set():
                receive = receive or asyncio.ensure_future(self.websocket.receive())
                done, _ = await asyncio.wait({receive}, timeout=IDLE_TICK_S)
                if not done:
                    due = self._idle_close()
                    if due is not None:
                        self._finish(*due)
                        return
                    continue
                message, receive, self._quiet_since = receive.result(), None, time.monotonic()
                await self._on_message(message)
        finally:
            if receive is not None:
                receive.cancel()

    async def _on_message(self, message: Any, settled: bool = False) -> None:
        if message["type"] == "websocket.disconnect":
            self._close = None  # the client left: nothing to close
            self._done.set()
            return
        text = message.get("text")
        if text is None:
            await self._error(GatewayError("binary messages are not accepted; send JSON text messages",
                                           code="bad_message"))
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > TEXT_LIMITS.max_message_bytes:
            self._finish(close_code_for("too_large"),
                         f"message of {size} bytes; the limit is {TEXT_LIMITS.max_message_bytes}")
            return
        try:
            parsed = parse_client_message(text, TEXT_LIMITS)
        except GatewayError as exc:
            await self._error(exc)
            return
        if settled or await self._settle(parsed):
            await self._dispatch(parsed)

    async def _settle(self, message: ElevenLabsMessage) -> bool:
        """Judge a credential a message carries (a context's first message may):
        an invalid one closes the socket 1008, as at the handshake."""
        if message.credential is None:
            return True
        decision = await settle(self.websocket.scope, self.auth, message.credential)
        if isinstance(decision, Refusal):
            self._finish(decision.close_code, decision.detail)
            return False
        return True

    # ---- dispatching

    async def _dispatch(self, message: ElevenLabsMessage) -> None:
        if message.close_socket and self.multi:
            await self._close_all()
            return
        key = (message.context_id or DEFAULT_CONTEXT) if self.multi else None
        context = self.contexts.get(key)
        if self._draining and message.text and message.text.strip():
            if context is None:  # a new context is a new session: refused as every session is
                await self._refuse_context(key, Draining(DRAINING_MESSAGE))
            else:
                await self._error(Draining(TEXT_NOT_TAKEN), key)
            return
        if message.close_context:
            if context is not None:
                await self._put(context, context.close_messages())
            return
        if message.text == "" and not message.flush:
            if self.multi:  # a keepalive: of its context, or of the socket (read above)
                if context is not None and not context.closing:
                    await self._put(context, [Keepalive()])
                return
            context = context or await self._open(key)  # stream-input: the end of the input
            if context is not None and not context.closing:
                context.closing = True
                await self._put(context, [End()])
            return
        if context is None:
            if message.text is None:
                return  # a flush of a context that does not exist: nothing to flush
            context = await self._open(key)
            if context is None:
                return
        if context.closing:
            return  # closed by the client: ElevenLabs ignores what follows
        out: list[ClientMessage] = []
        if message.text:
            out.append(TextFragment(text=message.text))
            context.text_unflushed = context.text_unflushed or bool(message.text.strip())
        if message.flush:
            out.append(Flush())
            context.text_unflushed = False
        await self._put(context, out)

    async def _put(self, context: Context, messages: list[ClientMessage]) -> None:
        for message in messages:
            try:
                await context.put(message, self.params.inactivity_timeout_s)
            except asyncio.TimeoutError:
                self._finish(close_code_for("idle_timeout"), "a context is not taking messages")
                return

    async def _close_all(self) -> None:
        self._closing_socket = True
        for context in list(self.contexts.values()):
            await self._put(context, context.close_messages())
        if not self.contexts:
            self._finish(close_code_for("normal_end"))

    # ---- contexts

    async def _open(self, key: str | None) -> Context | None:
        if self.multi and len(self.contexts) >= MAX_CONTEXTS:
            await self._refuse_context(key, OverCapacity(
                f"at most {MAX_CONTEXTS} contexts are open on one socket; close one first (close_context)"))
            return None
        audio = self.params.audio
        transport = ContextTransport(self.sender, key, audio)
        session = TtsSession(transport=transport, engine=self.engine, voice=self.voice, sample_rate=audio.sample_rate,
                             encoding=audio.format, engine_options=dict(self.params.engine_options),
                             config=SessionConfig(limits=TEXT_LIMITS, idle_timeout_s=self.params.inactivity_timeout_s))
        try:
            entry = self.sessions.claim_connection("tts", self.websocket, session.describe, session.drain)
        except OverCapacity as exc:
            await self._refuse_context(key, exc)
            return None
        context = Context(key, transport, session, entry)
        self.contexts[key] = context
        context.task = asyncio.create_task(self._run_context(context), name=f"elevenlabs-context-{key}")
        return context

    async def _refuse_context(self, key: str | None, error: GatewayError) -> None:
        await self._error(error, key)
        if self.multi:
            await self._send_quietly(self.sender.send(final_message(key), CLOSE_TIMEOUT_S))
        else:
            self._finish(error.close_code, error.message)

    async def _run_context(self, context: Context) -> None:
        try:
            await context.session.run()
        finally:
            self.sessions.remove(context.entry.id)
            if self.contexts.get(context.key) is context:
                del self.contexts[context.key]
            self._quiet_since = time.monotonic()
        code, reason = context.transport.close_code or (close_code_for("normal_end"), "")
        ended = context.transport.close_code is not None and not context.transport.final_sent
        if ended and (self.multi or code == close_code_for("going_away")):
            # ended by the drain, its inactivity timeout or an error: the client still learns it is over
            await self._send_quietly(self.sender.send(final_message(context.key), CLOSE_TIMEOUT_S))
        if not self.multi:
            self._finish(code, reason)
        elif self._draining and not self.contexts:
            self._finish(close_code_for("going_away"), GOING_AWAY_REASON)
        elif self._closing_socket and not self.contexts:
            self._finish(close_code_for("normal_end"))

    # ---- errors

    async def _error(self, error: GatewayError, key: str | None = None) -> None:
        context_id = key if self.multi else None
        message = error_message(error.code, error.message, error.http_status, context_id)
        await self._send_quietly(self.sender.send(message, CLOSE_TIMEOUT_S))

    async def _send_quietly(self, send: Awaitable[None]) -> None:
        with contextlib.suppress(Exception):  # the client left or does not read: the close decides
            await send
