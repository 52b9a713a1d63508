"""``WS /v2/listen``: Deepgram Flux's turn socket over the gateway's own
``DictationSession``.

The transport translates both ways and nothing else: binary audio becomes the
session's audio (the transport counts it: the audio clock the turns' measured
confidences read), ``ForceEndTurn`` its ``finalize`` (with an id),
``CloseStream`` its ``end``; ``Configure`` is answered here
(gateway/fronts/flux/configure.py) and is the session's ``config`` when it
changes the key terms (its ``keepalive`` otherwise). The
session's ``ready`` becomes ``Connected``, its utterance events ``TurnInfo``
(gateway/fronts/flux/turns.py), an ``error`` after ``Connected`` that the
stream goes on after a ``Warning``, and any other ``error`` Flux's ``Error``,
then the close.

Sends come from two tasks (the session's relay and, for a ``Configure``'s
answer, the reading task): one lock orders them and the ``sequence_id`` each
carries.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from auth.credentials import answer_subprotocol
from engines.asr.prompt_text import term_list_text
from gateway.config import Settings
from gateway.dictation.session import DictationSession
from gateway.dictation.transport import receive_bounded
from gateway.errors import GatewayError, close_code_for, close_socket
from gateway.fronts.deepgram.refusal import new_request_id, refuse, request_headers
from gateway.fronts.flux import messages as flux
from gateway.fronts.flux.configure import ConfigureRefused, StreamConfig, apply_configure
from gateway.fronts.flux.params import FluxParams, parse_flux_params
from gateway.fronts.flux.turns import TurnMapper
from gateway.protocol.common import Closed, End, ErrorEvent, Keepalive
from gateway.protocol.dictation import (
    ClientMessage,
    Config,
    Finalize,
    Ready,
    ServerEvent,
)

SEND_TIMEOUT_S = 10.0  # a Configure's answer: the client must read it as it reads TurnInfo


class FluxTransport:
    """The ``DictationTransport`` of one ``/v2/listen`` socket."""

    def __init__(self, websocket: WebSocket, params: FluxParams, request_id: str, turn_model: bool = False) -> None:
        self.websocket = websocket
        self.params = params
        self.config = StreamConfig(params.thresholds, params.keyterms)
        self.request_id = request_id
        self.session_params = params.session_params(turn_model)
        self.turns = TurnMapper(manual_turns=params.thresholds.manual, languages=params.language == "auto",
                                turn_threshold=self.session_params.turn_threshold)
        self._sequence = itertools.count(0)
        self._send_lock = asyncio.Lock()
        self._marks = itertools.count(1)
        self._audio_bytes = 0
        self._connected = False

    @property
    def heard_s(self) -> float:
        """The audio the client has sent, in seconds."""
        width = 2 if self.params.encoding == "linear16" else 1
        return self._audio_bytes / width / self.params.sample_rate

    # ---- client -> session

    async def receive(self) -> bytes | ClientMessage | None:
        text = await receive_bounded(self.websocket)
        if text is None or isinstance(text, bytes):
            self._audio_bytes += len(text or b"")
            return text
        control = flux.parse_client_control(text)
        if control.kind == "ForceEndTurn":
            mark = f"force-{next(self._marks)}"
            self.turns.force_end_turn(mark)
            return Finalize(id=mark)
        if control.kind == "Configure":
            try:
                new_terms = await self._configure(control.body)
            except asyncio.TimeoutError:  # the client does not read: as the relay, close it as idle
                await self.close(close_code_for("idle_timeout"), f"the client did not read for {SEND_TIMEOUT_S:.0f} s")
                return None
            return Keepalive() if new_terms is None else Config(term_list_text(new_terms), terms=new_terms)
        self.turns.close_stream()
        return End()

    async def _configure(self, body: dict[str, Any]) -> tuple[str, ...] | None:
        """Answer a ``Configure``; the stream's new key terms when it changed them, else None."""
        try:
            new = apply_configure(body, self.config)
        except ConfigureRefused as exc:
            await self._send(functools.partial(flux.configure_failure, self.request_id, code=exc.code,
                                               description=exc.description), SEND_TIMEOUT_S)
            return None
        old, self.config = self.config, new
        await self._send(functools.partial(flux.configure_success, self.request_id,
                                           thresholds=new.thresholds.to_dict(), keyterms=list(new.keyterms)),
                         SEND_TIMEOUT_S)
        return new.keyterms if new.keyterms != old.keyterms else None

    # ---- session -> client

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        if isinstance(event, Ready):
            self._connected = True
            await self._send(functools.partial(flux.connected, self.request_id), timeout_s)
        elif isinstance(event, ErrorEvent):
            if self._connected and event.close_code is None:
                await self._send(functools.partial(flux.warning, self.request_id, code=event.code,
                                                   description=event.message), timeout_s)
            else:
                await self._send(functools.partial(flux.fatal_error, code=event.code,
                                                   description=event.message), timeout_s)
        elif not isinstance(event, Closed):  # Flux says nothing at the end: the close does
            for turn in self.turns.map(event, self.heard_s):
                await self._send(functools.partial(turn.to_dict, self.request_id), timeout_s)

    async def _send(self, build: Callable[..., dict[str, Any]], timeout_s: float) -> None:
        """Send ``build(sequence_id=...)``, the next sequence id taken under the lock."""
        async with self._send_lock:
            message = build(sequence_id=next(self._sequence))
            await asyncio.wait_for(self.websocket.send_json(message), timeout_s)

    async def close(self, code: int, reason: str) -> None:
        await close_socket(self.websocket, code, reason)


def _refusal(code: str, message: str) -> dict[str, Any]:
    """A refusal before anything else was sent: the socket's first message."""
    return flux.fatal_error(0, code, message)


async def flux_socket(websocket: WebSocket) -> None:
    """``/v2/listen``: validate the query and capacity, then run the dictation session."""
    state = websocket.state
    settings: Settings = state.settings
    request_id = new_request_id()
    await websocket.accept(subprotocol=answer_subprotocol(websocket.scope), headers=request_headers(request_id))
    try:
        params = parse_flux_params(websocket.query_params)
    except GatewayError as exc:
        await refuse(websocket, exc, _refusal)
        return
    transport = FluxTransport(websocket, params, request_id, turn_model=state.asr is not None and state.asr.turn_model)
    session = DictationSession(transport, transport.session_params, settings, state.asr)
    await state.sessions.run_connection("dictation", websocket, session.describe, session.drain,
                                        functools.partial(refuse, websocket, build=_refusal), session.run)
