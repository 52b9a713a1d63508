"""``WS /v1/text-to-speech/{voice_id}/stream-input`` and ``.../multi-stream-input``.

A client that presented no credential at the handshake, where one is needed,
is let in pending (auth/inband.py, gateway/admission.py): its first message is
read here, within ``auth_wait_s``, and its ``xi_api_key`` (or ``authorization``)
judged before the socket answers anything else; a refusal closes 1008 with
AUTH.md's detail. That message is measured before it is parsed: past
``PRE_AUTH_MAX_MESSAGE_BYTES`` it closes 1009 naming the limit (the server
refuses such a frame from its header already; this check holds under any server).

Then the query is checked, the engine must be ready and the output format's
codec present before the socket serves anything; a refusal is an ElevenLabs
error message and a close with the error's code (4400 a bad parameter, 1013
over capacity, loading or draining, 1011 unavailable). The socket is held in
the session registry, so the drain before a stop reaches it. The rest is
connection.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from starlette.websockets import WebSocket

from auth import AuthState
from auth.inband import is_pending, settle
from auth.policy import Refusal
from gateway.admission import settled
from gateway.codecs.pyav import load_av
from gateway.errors import (
    CLOSE_TIMEOUT_S,
    GatewayError,
    OverCapacity,
    close_code_for,
    close_socket,
)
from gateway.fronts.elevenlabs.connection import Connection
from gateway.fronts.elevenlabs.fields import engine_id_for, language_options
from gateway.fronts.elevenlabs.messages import credential_of, error_message
from gateway.fronts.elevenlabs.params import parse_socket_params, voice_for
from gateway.protocol.json import utf8_size
from gateway.registry import client_label
from gateway.serving import PRE_AUTH_MAX_MESSAGE_BYTES
from gateway.tts.selection import check_ready, pick_engine


async def settle_first(websocket: WebSocket, auth: AuthState, wait_s: float) -> str | None:
    """The first message of a pending socket, once its credential is accepted;
    None after closing the socket (refused, or the client left)."""
    try:
        message = await asyncio.wait_for(websocket.receive(), wait_s)
    except asyncio.TimeoutError:
        message = {"type": "websocket.receive"}
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if text is not None:
        size = utf8_size(text)
        if size > PRE_AUTH_MAX_MESSAGE_BYTES:
            limit = PRE_AUTH_MAX_MESSAGE_BYTES
            await close_socket(websocket, close_code_for("too_large"),
                               f"first message of {size} bytes; the limit before authentication is {limit}")
            return None
    decision = await settle(websocket.scope, auth, credential_of(text) if text is not None else None)
    if isinstance(decision, Refusal):
        await close_socket(websocket, decision.close_code, decision.detail)
        return None
    if text is None:
        await close_socket(websocket, close_code_for("policy_violation"), "")
        return None
    settled(websocket.scope)
    return str(text)


async def refuse(websocket: WebSocket, error: GatewayError) -> None:
    with contextlib.suppress(Exception):  # the client left first: the close below is a no-op then
        await asyncio.wait_for(websocket.send_json(error_message(error.code, error.message, error.http_status)),
                               CLOSE_TIMEOUT_S)
    await close_socket(websocket, error.close_code, error.message)


async def _serve(websocket: WebSocket, *, multi: bool) -> None:
    state = websocket.state
    await websocket.accept()
    first = None
    if is_pending(websocket.scope):
        first = await settle_first(websocket, state.auth, state.settings.auth_wait_s)
        if first is None:
            return
    try:
        params = parse_socket_params(websocket.query_params)
        engine = pick_engine(state.tts, engine_id_for(state.tts, params.model_id, state.settings.tts_engine))
        check_ready(engine)
        params = replace(params, engine_options=language_options(engine, params.language_code))
        if params.audio.format.needs_av:
            load_av()  # here, so a server without FFmpeg refuses the socket instead of failing mid-utterance
    except GatewayError as exc:
        await refuse(websocket, exc)
        return
    voice = voice_for(engine, str(websocket.path_params.get("voice_id", "")))
    connection = Connection(websocket, auth=state.auth, sessions=state.sessions, engine=engine, voice=voice,
                            params=params, multi=multi, first=first)
    try:
        hold = state.sessions.hold(client_label(websocket), connection.drain)
    except OverCapacity as exc:  # draining
        await refuse(websocket, exc)
        return
    try:
        await connection.run()
    finally:
        state.sessions.release(hold)


async def stream_input(websocket: WebSocket) -> None:
    await _serve(websocket, multi=False)


async def multi_stream_input(websocket: WebSocket) -> None:
    await _serve(websocket, multi=True)
