"""``WS /v1/text-to-speech/{voice_id}/stream-input`` and ``.../multi-stream-input``.

The query is checked, the engine must be ready and the output format's codec
present before the socket serves anything; a refusal is an ElevenLabs error
message and a close with the error's code (4400 a bad parameter, 1013 over
capacity or loading, 1011 unavailable). The rest is connection.py's.
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.websockets import WebSocket

from gateway.codecs.pyav import load_av
from gateway.errors import CLOSE_TIMEOUT_S, GatewayError, close_socket
from gateway.fronts.elevenlabs.connection import Connection
from gateway.fronts.elevenlabs.messages import error_message
from gateway.fronts.elevenlabs.params import engine_id_for, parse_socket_params, voice_for
from gateway.tts.selection import check_ready, pick_engine


async def refuse(websocket: WebSocket, error: GatewayError) -> None:
    with contextlib.suppress(Exception):  # the client left first: the close below is a no-op then
        await asyncio.wait_for(websocket.send_json(error_message(error.code, error.message, error.http_status)),
                               CLOSE_TIMEOUT_S)
    await close_socket(websocket, error.close_code, error.message)


async def _serve(websocket: WebSocket, *, multi: bool) -> None:
    state = websocket.state
    await websocket.accept()
    try:
        params = parse_socket_params(websocket.query_params)
        engine = pick_engine(state.tts, engine_id_for(state.tts, params.model_id, state.settings.tts_engine))
        check_ready(engine)
        if params.audio.format.needs_av:
            load_av()  # here, so a server without FFmpeg refuses the socket instead of failing mid-utterance
    except GatewayError as exc:
        await refuse(websocket, exc)
        return
    voice = voice_for(engine, str(websocket.path_params.get("voice_id", "")))
    connection = Connection(websocket, auth=state.auth, sessions=state.sessions, engine=engine, voice=voice,
                            params=params, multi=multi)
    await connection.run()


async def stream_input(websocket: WebSocket) -> None:
    await _serve(websocket, multi=False)


async def multi_stream_input(websocket: WebSocket) -> None:
    await _serve(websocket, multi=True)
