"""``WS /v1/speak``: Deepgram's streaming text-to-speech socket over the
gateway's own ``TtsSession``.

``Speak{text}`` is the session's ``text`` fragment (so a client that sends one
word at a time gets each sentence synthesized as soon as it is complete),
``Flush`` its ``flush`` with an id (answered ``Flushed{sequence_id}``),
``Clear`` its ``cancel`` (barge-in: the engine stream stops at the next frame
and queued audio is dropped; answered ``Cleared{sequence_id}``), ``Close`` its
``end``. Audio goes out as binary frames in the requested encoding; the
session's errors that do not end it become ``Warning`` messages.

``sequence_id`` counts the client's ``Flush`` and ``Clear`` messages of the
socket, from 0, in the order they were sent.

Idle: a quiet socket is held open for the client as at Deepgram
(held_text.py). A client that stops reading audio is still closed after
``VOXGATE_IDLE_TIMEOUT_S``: that rule does not look at messages.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from auth.credentials import answer_subprotocol
from gateway.errors import GatewayError, close_socket
from gateway.fronts.deepgram import messages as dg
from gateway.fronts.deepgram.held_text import HeldTextInbox
from gateway.fronts.deepgram.params import (
    OUTPUT_FORMATS,
    SPEAK_MODEL_FAMILIES,
    SpeakParams,
    check_model,
    parse_speak_params,
)
from gateway.fronts.deepgram.refusal import new_request_id, refuse, request_headers
from gateway.protocol.common import End
from gateway.protocol.tts import Cancel, ClientMessage, Flush, TextFragment, TextLimits, text_too_long
from gateway.tts.selection import check_ready, pick_engine, voice_ids
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig

TEXT_LIMITS = TextLimits()  # Deepgram's own limit is 2000 characters a Speak message too


class SpeakTransport:
    """The ``TtsTransport`` of one ``/v1/speak`` socket."""

    def __init__(self, websocket: WebSocket, params: SpeakParams, idle_timeout_s: float) -> None:
        self.websocket = websocket
        self.params = params
        self._sequence = itertools.count(0)
        self._clears: deque[int] = deque()  # sequence ids of Clears not answered yet
        self._inbox = HeldTextInbox(websocket, idle_timeout_s, TEXT_LIMITS)

    async def receive(self) -> ClientMessage | None:
        text = await self._inbox.next_text("binary messages are not accepted on /v1/speak; send Speak, Flush, "
                                           "Clear or Close")
        if not isinstance(text, str):
            return text
        parsed = dg.parse_speak_message(text)
        if parsed.kind == "Speak":
            if len(parsed.text) > TEXT_LIMITS.max_chars:
                raise text_too_long("Speak.text", len(parsed.text), TEXT_LIMITS)
            return TextFragment(text=parsed.text)
        if parsed.kind == "Flush":
            return Flush(id=str(next(self._sequence)))
        if parsed.kind == "Clear":
            self._clears.append(next(self._sequence))
            return Cancel()
        self._inbox.ending = True
        return End()

    async def send_audio(self, data: bytes) -> None:
        await self.websocket.send_bytes(data)  # already in the client's encoding (codec layer)

    async def send_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "flushed":
            await self.websocket.send_json(dg.flushed(int(event["id"])))
        elif kind == "cancelled":
            await self.websocket.send_json(dg.cleared(self._clears.popleft() if self._clears else 0))
        elif kind == "error":
            await self.websocket.send_json(dg.warning(str(event.get("code", "")), str(event.get("message", ""))))
        # start, end and closed have no Deepgram counterpart: the audio itself says it

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        await close_socket(self.websocket, code, reason, timeout_s)


def _voice_for(engine_voices: list[str], model: str, default: str | None) -> str | None:
    """Deepgram names a voice by its model (``aura-2-thalia-en``); a voice of that
    id here is used, any other model gets the engine's default voice."""
    return model if model in engine_voices else default


async def speak_socket(websocket: WebSocket) -> None:
    """``/v1/speak``: validate the query, engine and capacity, send Metadata, run the TTS session."""
    state = websocket.state
    settings = state.settings
    request_id = new_request_id()
    await websocket.accept(subprotocol=answer_subprotocol(websocket.scope), headers=request_headers(request_id))
    try:
        params = parse_speak_params(websocket.query_params)
        engine = pick_engine(state.tts, settings.tts_engine)
        check_ready(engine)
        check_model(params.model, voice_ids(engine), SPEAK_MODEL_FAMILIES)
    except GatewayError as exc:
        await refuse(websocket, exc, dg.listen_error)
        return
    info = engine.info()
    voice = _voice_for(voice_ids(engine), params.model, info.default_voice)
    transport = SpeakTransport(websocket, params, settings.idle_timeout_s)
    session = TtsSession(transport=transport, engine=engine, voice=voice,
                         sample_rate=params.sample_rate, encoding=OUTPUT_FORMATS[params.encoding],
                         config=SessionConfig(limits=TEXT_LIMITS, idle_timeout_s=settings.idle_timeout_s))

    async def run(_session_id: str, _release: Callable[[], None]) -> None:
        model = dg.ModelInfo(f"{info.id}-{voice}" if voice else info.id, info.id)
        await websocket.send_json(dg.speak_metadata(request_id=request_id, model=model))
        await session.run()

    await state.sessions.run_connection("tts", websocket, session.describe, session.drain,
                                        functools.partial(refuse, websocket, build=dg.listen_error), run)
