"""``WS /v1/realtime?intent=transcription``: OpenAI's Realtime API in its
transcription mode, over the gateway's own ``DictationSession``.

The socket opens with ``session.created`` (the default configuration: 24 kHz
PCM, server VAD). ``session.update`` events are answered until the first audio
arrives; that audio starts the dictation session with the format, language
and silence window configured by then (``?model=`` is accepted and ignored:
the configured recognizer answers whatever the client names).

Refusals are OpenAI ``error`` events followed by a close: 1013 over capacity
or draining (openai-python retries it), 1011 when no recognizer is available,
4400 for a conversation session (no ``intent=transcription``), which this
server does not offer. Auth refusals close 1008 before this route runs (AUTH.md).

The drain before a stop: a socket still configuring closes 1001 at once; one
with audio stops taking appends at once (each later event is answered with a
``draining`` error), its dictation session finalizes every sample it read,
the items get their ``completed`` (the transport commits the buffer without
server VAD), then the session closes 1001 as /v1/dictation does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from auth.access import RouteClass, ws_route
from auth.credentials import answer_subprotocol
from engines.base import AsrService
from gateway.config import Settings
from gateway.dictation.asr_gate import asr_refusal
from gateway.dictation.relay import GOING_AWAY_REASON
from gateway.dictation.session import DictationSession
from gateway.engine_view import public_model_name
from gateway.errors import (
    CLOSE_TIMEOUT_S,
    BadRequest,
    GatewayError,
    close_code_for,
    close_socket,
)
from gateway.fronts.openai_realtime.config import REALTIME_MODELS, TranscriptionConfig
from gateway.fronts.openai_realtime.transport import HANDOVER_S, RealtimeTransport
from gateway.protocol.query import refuse_unknown_params
from gateway.tasks import cancel_and_wait


class _Socket:
    """The registry's view of the socket: the admin listing (configuring, then
    the dictation session's own) and the drain."""

    def __init__(self, transport: RealtimeTransport) -> None:
        self.transport = transport
        self.session: DictationSession | None = None

    def describe(self) -> dict[str, Any]:
        described = {"front": "openai-realtime"}
        described.update(self.session.describe() if self.session is not None else {"phase": "configuring"})
        return described

    def drain(self, now: bool) -> None:
        self.transport.begin_drain()
        if self.session is not None:
            self.session.drain(True)  # appends are refused from now on: finalize what was read


async def _first_audio(transport: RealtimeTransport, idle_timeout_s: float) -> bool | None:
    """True when the first audio came, False when the client left, None when the
    drain began first (nothing was appended: nothing is lost)."""
    reading = asyncio.ensure_future(transport.first_audio())
    drain = asyncio.ensure_future(transport.drain_begun.wait())
    try:
        done, _ = await asyncio.wait({reading, drain}, timeout=idle_timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait([reading, drain], HANDOVER_S)
    if reading in done and not reading.cancelled():
        return reading.result()  # audio read as the drain began is still transcribed
    if drain in done:
        return None
    raise asyncio.TimeoutError


async def _refuse(transport: RealtimeTransport, error: GatewayError) -> None:
    with contextlib.suppress(Exception):  # the client left first: the close below is a no-op then
        await transport.send_error(error)
    await close_socket(transport.websocket, error.close_code, error.message, CLOSE_TIMEOUT_S)


def _check_query(query: Any, asr_model: str) -> None:
    """``intent`` must be transcription; ``model``, a transcription model (the one
    the session starts with is set by ``session.update``); nothing else is taken."""
    intent = query.get("intent")
    if intent != "transcription":
        what = "missing" if intent is None else f"{intent[:40]!r} is not supported"
        raise BadRequest(f"intent: {what}; this server runs transcription sessions only: connect to "
                         "/v1/realtime?intent=transcription")
    refuse_unknown_params(query, ("intent", "model"))
    model = query.get("model")
    if model and model not in REALTIME_MODELS and model != asr_model:
        raise BadRequest(f"model: {model[:40]!r} is not served; use an OpenAI transcription model or "
                         f"{asr_model or 'the recognizer'}")


async def realtime_socket(websocket: WebSocket) -> None:
    state = websocket.state
    settings: Settings = state.settings
    offered = [str(p) for p in websocket.scope.get("subprotocols") or ()]
    await websocket.accept(subprotocol="realtime" if "realtime" in offered else answer_subprotocol(websocket.scope))
    asr = state.asr
    languages = list(asr.info()["languages"]) if asr is not None else []
    transport = RealtimeTransport(websocket, TranscriptionConfig(), languages, settings.idle_timeout_s,
                                  asr_model=public_model_name(str(asr.info()["model"])) if asr is not None else "")
    try:
        _check_query(websocket.query_params, transport.asr_model)
        refusal = asr_refusal(asr)
        if refusal is not None:
            raise refusal
    except GatewayError as exc:
        await _refuse(transport, exc)
        return
    socket = _Socket(transport)
    await state.sessions.run_connection("dictation", websocket, socket.describe, socket.drain,
                                        functools.partial(_refuse, transport),
                                        functools.partial(_transcribe, socket, settings, asr))


async def _transcribe(socket: _Socket, settings: Settings, asr: AsrService | None, session_id: str,
                      release_slot: Callable[[], None]) -> None:
    """Answer ``session.update`` until the first audio, then run the dictation session."""
    transport = socket.transport
    websocket = transport.websocket
    try:
        await transport.send_session_created()
        try:
            started = await _first_audio(transport, settings.idle_timeout_s)
        except asyncio.TimeoutError:
            idle_s = settings.idle_timeout_s
            await close_socket(websocket, close_code_for("idle_timeout"), f"no audio for {idle_s:.0f} s")
            return
        if started is None:
            await close_socket(websocket, close_code_for("going_away"), GOING_AWAY_REASON)
            return
        if not started:
            return
        try:
            session = DictationSession(transport, transport.config.dictation_params(), settings, asr)
        except GatewayError as exc:  # a codec the format needs is missing
            await _refuse(transport, exc)
            return
        socket.session = session
        if transport.draining:  # it began while the first audio was read
            socket.drain(False)
        await session.run(session_id, release_slot)
    finally:
        await transport.stop_refusing()


def openai_realtime_routes() -> list[BaseRoute]:
    return [ws_route("/v1/realtime", realtime_socket, access=RouteClass.CONSUME, name="openai_realtime")]
