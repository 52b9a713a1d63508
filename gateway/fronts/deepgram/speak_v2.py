"""``WS /v2/speak``: Deepgram's Flux TTS socket over the gateway's own ``TtsSession``.

``Speak{text}`` is the session's ``text`` fragment of the open turn (each
sentence is synthesized once complete), ``Flush`` ends the turn (the session's
``flush`` with the turn's ``speech_id``: ``SpeechMetadata`` then ``Flushed``
once all its audio is out), ``Interrupt{playback_offset}`` its ``cancel`` with
``played_ms`` (the engine stream stops at the next frame, queued audio is
dropped; answered ``SpeechInterrupted`` with the turn's text heard and left),
``Clear`` an ``Interrupt`` without an offset, ``Configure{speed}`` answered at
once, ``Close`` flushes the open turn, then the session's ``end``
(``SessionMetadata``, close 1000). ``SpeechStarted`` goes before a turn's first
audio. Turn bookkeeping: speak_v2_turns.py; message shapes: speak_v2_messages.py.

Idle: as ``/v1/speak``, a quiet socket is held open for the client
(held_text.py); a client that stops reading audio is closed after
``VOXGATE_IDLE_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from auth.credentials import answer_subprotocol
from gateway.errors import BadMessage, BadRequest, GatewayError, close_socket
from gateway.fronts.deepgram import speak_v2_messages as flux
from gateway.fronts.deepgram.held_text import HeldTextInbox
from gateway.fronts.deepgram.params import OUTPUT_FORMATS
from gateway.fronts.deepgram.refusal import new_request_id, refuse, request_headers
from gateway.fronts.deepgram.speak import TEXT_LIMITS
from gateway.fronts.deepgram.speak_v2_turns import Turns
from gateway.protocol.common import End, Keepalive
from gateway.protocol.tts import Cancel, ClientMessage, Flush, TextFragment, text_too_long
from gateway.tts.selection import check_ready, pick_engine, voice_ids
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig
from gateway.tts.timeline import PlayTimeline

MAX_TURN_CHARS = 64_000  # one turn's text; Speak past it is refused (Error), the turn goes on


class SpeakV2Transport:
    """The ``TtsTransport`` of one ``/v2/speak`` socket."""

    def __init__(self, websocket: WebSocket, params: flux.SpeakV2Params, idle_timeout_s: float) -> None:
        self.websocket = websocket
        self.params = params
        self.turns = Turns()
        self.timeline: PlayTimeline | None = None  # the session's, once it exists
        self._then: deque[ClientMessage] = deque(maxlen=1)  # Close with a turn open: its Flush, then End
        self._offsets: deque[int | None] = deque()  # of the interrupts the session has not answered yet
        self._speed = params.speed
        self._bytes_per_ms = params.sample_rate * (2 if params.encoding == "linear16" else 1) / 1000
        self._audio_sent = False
        self._send_lock = asyncio.Lock()  # the reader answers Configure and warnings while the sender runs
        self._send_timeout_s = idle_timeout_s
        self._inbox = HeldTextInbox(websocket, idle_timeout_s, TEXT_LIMITS)

    # ---- client -> session

    async def receive(self) -> ClientMessage | None:
        if self._then:
            return self._then.popleft()
        text = await self._inbox.next_text("binary messages are not accepted on /v2/speak; send Speak, Flush, "
                                           "Interrupt, Configure or Close")
        if not isinstance(text, str):
            return text
        return await self._translate(flux.parse_client_message(text))

    async def _translate(self, msg: flux.ClientMessage) -> ClientMessage:
        if msg.kind == "Speak":
            if len(msg.text) > TEXT_LIMITS.max_chars:
                raise text_too_long("Speak.text", len(msg.text), TEXT_LIMITS)
            open_chars = len(self.turns.open.text) if self.turns.open else 0
            if open_chars + len(msg.text) > MAX_TURN_CHARS:
                raise BadMessage(f"Speak.text: this turn holds {open_chars} characters and one turn holds at "
                                 f"most {MAX_TURN_CHARS}; send Flush to end it", code="text_too_long")
            self.turns.speak(msg.text)
            return TextFragment(text=msg.text)
        if msg.kind == "Flush":
            turn = self.turns.flush()
            if turn is None:
                await self._send(flux.warning("NO_ACTIVE_SPEECH", "Flush with no turn open: nothing to flush"))
                return Keepalive()
            return Flush(id=turn.speech_id)
        if msg.kind in ("Interrupt", "Clear"):
            return await self._interrupt(msg.playback_offset_ms)
        if msg.kind == "Configure":
            await self._send(self._configure(msg.speed))
            return Keepalive()
        self._inbox.ending = True  # Close
        turn = self.turns.flush()
        if turn is None:
            return End()
        self._then.append(End())
        return Flush(id=turn.speech_id)

    async def _interrupt(self, offset_ms: int | None) -> ClientMessage:
        if not self.turns.any():
            code, why = ("NO_ACTIVE_SPEECH", "no turn since the last Interrupt") if self._audio_sent else \
                ("NO_AUDIO_GENERATED", "this session has produced no audio yet")
            await self._send(flux.warning(code, f"Interrupt ignored: {why}"))
            return Keepalive()
        if offset_ms is not None and self.timeline is not None:
            try:
                self.timeline.check(offset_ms)
            except BadMessage as exc:
                await self._send(flux.warning("INVALID_INTERRUPT_OFFSET", f"Interrupt ignored: {exc.message}"))
                return Keepalive()
        self.turns.interrupt()
        self._offsets.append(offset_ms)
        return Cancel(played_ms=offset_ms)

    def _configure(self, speed: float | None) -> dict[str, Any]:
        if speed is None:
            return flux.configure_success(self._speed)
        problem = flux.speed_problem(speed)
        if problem is not None:
            return flux.configure_failure(problem[0], f"speed: {problem[1]}", speed)
        if abs(speed - flux.ENGINE_SPEED) > 1e-9:
            return flux.configure_failure("SPEED_NOT_SUPPORTED", "speed: the engines here speak at speed 1.0 only",
                                          None)
        self._speed = flux.ENGINE_SPEED
        return flux.configure_success(self._speed)

    # ---- session -> client

    async def send_audio(self, data: bytes) -> None:
        turn = self.turns.current()
        if turn is not None:
            turn.audio_ms += len(data) / self._bytes_per_ms
        self._audio_sent = True
        async with self._send_lock:
            await self.websocket.send_bytes(data)

    async def send_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "start":
            turn = self.turns.started(str(event["id"]), str(event.get("text", "")))
            if turn is not None:
                await self._send(flux.speech_started(turn.speech_id))
        elif kind == "flushed":
            await self._turn_ended(str(event["id"]))
        elif kind == "cancelled":
            await self._interrupted(event)
        elif kind == "closed":
            await self._send(flux.session_metadata(self._played_ms(), self.turns.chars))
        elif kind == "error":
            await self._send(flux.error(str(event.get("code", "")), str(event.get("message", ""))))
        # end has no Flux counterpart: a turn ends with its Flush

    async def _turn_ended(self, speech_id: str) -> None:
        turn = self.turns.end(speech_id)
        if turn is None:
            return
        if not turn.started:
            await self._send(flux.warning("NO_SYNTHESIZABLE_TEXT", "the turn's text was empty or whitespace: "
                                          "no audio"))
        await self._send(flux.speech_metadata(turn.speech_id, round(turn.audio_ms), len(turn.text)))
        await self._send(flux.flushed(turn.speech_id))

    async def _interrupted(self, event: dict[str, Any]) -> None:
        offset = self._offsets.popleft() if self._offsets else None
        utterance_id = event.get("id")
        turn = self.turns.answer(None if utterance_id is None else str(utterance_id))
        if turn is None:
            await self._send(flux.warning("NO_ACTIVE_SPEECH", "Interrupt found no turn"))
            return
        spoken = remaining = None
        if offset is not None:
            spoken, remaining = turn.split(None if utterance_id is None else str(utterance_id),
                                           str(event.get("text_spoken", "")))
        played = offset if offset is not None else self._played_ms()
        metadata = flux.turn_metadata(turn.speech_id, round(turn.audio_ms), len(turn.text))
        await self._send(flux.speech_interrupted(played, spoken, remaining, metadata))

    def _played_ms(self) -> int:
        return 0 if self.timeline is None else round(self.timeline.ms(self.timeline.position))

    async def _send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await asyncio.wait_for(self.websocket.send_json(message), self._send_timeout_s)

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        await close_socket(self.websocket, code, reason, timeout_s)


def _voice_for(model: str, voices: list[str], default: str | None) -> str | None:
    """A voice of the engine by its id, or the engine's default voice for a Flux model name."""
    if model in voices:
        return model
    if model.startswith("flux-"):
        return default
    raise BadRequest(f"model: {model[:40]!r} is not served here; use flux-* (the default voice) or one of: "
                     f"{', '.join(voices)}")


async def speak_v2_socket(websocket: WebSocket) -> None:
    """``/v2/speak``: validate the query, engine and capacity, send Connected, run the TTS session."""
    state = websocket.state
    settings = state.settings
    request_id = new_request_id()
    await websocket.accept(subprotocol=answer_subprotocol(websocket.scope), headers=request_headers(request_id))
    try:
        params = flux.parse_params(websocket.query_params)
        engine = pick_engine(state.tts, settings.tts_engine)
        check_ready(engine)
        voice = _voice_for(params.model, voice_ids(engine), engine.info().default_voice)
    except GatewayError as exc:
        await refuse(websocket, exc, flux.error)
        return
    info = engine.info()
    transport = SpeakV2Transport(websocket, params, settings.idle_timeout_s)
    session = TtsSession(transport=transport, engine=engine, voice=voice, sample_rate=params.sample_rate,
                         encoding=OUTPUT_FORMATS[params.encoding],
                         config=SessionConfig(limits=TEXT_LIMITS, idle_timeout_s=settings.idle_timeout_s))
    transport.timeline = session.timeline

    async def run(_session_id: str, _release: Callable[[], None]) -> None:
        await websocket.send_json(flux.connected(request_id, f"{info.id}-{voice}" if voice else info.id))
        await session.run()

    await state.sessions.run_connection("tts", websocket, session.describe, session.drain,
                                        functools.partial(refuse, websocket, build=flux.error), run)
