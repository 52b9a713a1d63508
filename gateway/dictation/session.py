"""The /v1/dictation session: audio in, transcript events out, one per socket.

The receiving side (the task that runs ``DictationSession.run``) validates and
decodes client messages, resamples audio to 16 kHz and hands it to its ASR
stream; a sender task relays the stream's events to the client. Both end
together: on ``end`` (after ``closed``, close 1000), on disconnect, on an idle
client (4408), on a message too big (1009) or a broken client (1011). Sends
are serialised by a lock; every wait has a timeout.

The session's phase is explicit and ``TRANSITIONS`` says which client message
each phase accepts; anything else is a ``bad_message``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from engines.base import AsrService, AsrStreamHandle, EngineState
from gateway.audio import AudioFormatError, PcmDecoder, StreamResampler
from gateway.config import Settings
from gateway.dictation.sidecar import disabled_error, unavailable_error
from gateway.errors import (
    CLOSE_IDLE,
    CLOSE_NORMAL,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_BIG,
    BadAudio,
    BadMessage,
    BadRequest,
    GatewayError,
    close_socket,
    refuse_socket,
)
from gateway.protocol.dictation import (
    MAX_AUDIO_MESSAGE_BYTES,
    MAX_TEXT_MESSAGE_BYTES,
    Closed,
    DictationParams,
    End,
    Finalize,
    Ready,
    parse_client_message,
)

log = logging.getLogger("voxgate.dictation")

ASR_START_WAIT_S = 30.0  # a socket opened while the sidecar loads waits this long for it
END_WAIT_S = 120.0  # after ``end``: the last finals may queue behind other streams' decodes
ASR_RATE = 16000
AUDIO = "audio"  # the transition name of a binary message


class Phase(str, enum.Enum):
    STREAMING = "streaming"
    ENDING = "ending"  # the client sent ``end``; waiting for the last finals and ``closed``
    CLOSED = "closed"


# Which client messages each phase accepts, and the phase they lead to.
TRANSITIONS: dict[Phase, dict[str, Phase]] = {
    Phase.STREAMING: {AUDIO: Phase.STREAMING, "finalize": Phase.STREAMING, "keepalive": Phase.STREAMING,
                      "end": Phase.ENDING},
    Phase.ENDING: {},
    Phase.CLOSED: {},
}


def transition(phase: Phase, message_type: str) -> Phase:
    """The phase after ``message_type`` in ``phase``; ``BadMessage`` if illegal."""
    nxt = TRANSITIONS[phase].get(message_type)
    if nxt is None:
        raise BadMessage(f"{message_type!r} is not accepted while the stream is {phase.value}")
    return nxt


class DictationSession:
    """One /v1/dictation socket after its parameters were accepted."""

    def __init__(self, websocket: WebSocket, params: DictationParams, settings: Settings,
                 asr: AsrService | None) -> None:
        self.websocket = websocket
        self.params = params
        self.settings = settings
        self.asr = asr
        self.phase = Phase.STREAMING
        self.stream: AsrStreamHandle | None = None
        self._decoder = PcmDecoder(params.encoding)
        self._resampler = StreamResampler(params.sample_rate, ASR_RATE)
        self._send_lock = asyncio.Lock()
        self._closed = False

    def describe(self) -> dict[str, Any]:
        stream = self.stream
        return {"phase": self.phase.value, "sample_rate": self.params.sample_rate,
                "language": self.params.language,
                "audio_s": round(stream.audio_s, 3) if stream else 0.0,
                "utterances": stream.finals if stream else 0,
                "lag_s": round(stream.lag_s, 3) if stream else 0.0}

    # ---- lifecycle

    async def run(self, session_id: str) -> None:
        asr = await self._usable_asr()
        if asr is None:
            return
        options = {"language": None if self.params.language == "auto" else self.params.language,
                   "interim": self.params.interim, "word_timestamps": self.params.word_timestamps,
                   "silence_ms": self.params.silence_ms, "eager": self.params.eager}
        self.stream = stream = await asr.open_stream(options)
        sender = asyncio.create_task(self._relay_events(stream), name=f"dictation-send-{session_id}")
        try:
            await self._send(Ready(session=session_id, sample_rate=self.params.sample_rate,
                                   encoding=self.params.encoding.value, language=self.params.language,
                                   model=asr.model_name).to_dict())
            await self._receive_loop(stream, sender)
        except WebSocketDisconnect:
            pass
        finally:
            if not sender.done():
                sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            await stream.close()
            self.phase = Phase.CLOSED

    async def _usable_asr(self) -> AsrService | None:
        """The ASR service, or None after refusing the socket (error event + close)."""
        asr = self.asr
        if asr is None:
            await self._refuse(disabled_error())
            return None
        state = asr.status().state
        if state in (EngineState.MISSING, EngineState.FAILED) or (
                state is EngineState.LOADING and asr.restarts == 0 and not await asr.wait_ready(ASR_START_WAIT_S)):
            await self._refuse(unavailable_error(asr.status()))
            return None
        languages = asr.info()["languages"]
        language = self.params.language
        if language != "auto" and languages and language not in languages:
            shown = ", ".join(languages[:20]) + (" ..." if len(languages) > 20 else "")
            hint = "; install multilingual Whisper base: voxgate models install whisper-base" \
                if languages == ["en"] else ""
            await self._refuse(BadRequest(f"language: the ASR model {asr.model_name} does not support {language!r} "
                                          f"(available: {shown}){hint}", code="unsupported_language"))
            return None
        return asr

    async def _refuse(self, error: GatewayError) -> None:
        self._closed = True
        await refuse_socket(self.websocket, error, timeout_s=self.settings.idle_timeout_s)

    async def _close(self, code: int, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        await close_socket(self.websocket, code, reason)

    async def _send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await asyncio.wait_for(self.websocket.send_json(message), self.settings.idle_timeout_s)

    # ---- client -> server

    async def _receive_loop(self, stream: AsrStreamHandle, sender: asyncio.Task[None]) -> None:
        idle_s = self.settings.idle_timeout_s
        while self.phase is Phase.STREAMING:
            receive = asyncio.ensure_future(self.websocket.receive())
            done, _ = await asyncio.wait({receive, sender}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
            if receive not in done:
                receive.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await receive
                if sender in done:
                    return  # the sender closed the socket (broken client or sidecar error)
                await self._close(CLOSE_IDLE, f"no audio or message for {idle_s:.0f} s")
                return
            message = receive.result()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                if not await self._on_audio(stream, message["bytes"]):
                    return
            elif message.get("text") is not None:
                if not await self._on_text(stream, message["text"]):
                    return
        await self._wait_for_end(sender)

    async def _on_audio(self, stream: AsrStreamHandle, data: bytes) -> bool:
        if len(data) > MAX_AUDIO_MESSAGE_BYTES:
            await self._close(CLOSE_TOO_BIG, f"audio message of {len(data)} bytes; the limit is "
                                             f"{MAX_AUDIO_MESSAGE_BYTES}, send smaller chunks")
            return False
        self.phase = transition(self.phase, AUDIO)
        try:
            samples = self._decoder.feed(data)
        except AudioFormatError as exc:
            await self._send(BadAudio(f"{exc}; the message was dropped").to_event())
            return True
        await stream.send_audio(self._resampler.feed(samples))
        return True

    async def _on_text(self, stream: AsrStreamHandle, text: str) -> bool:
        if len(text.encode("utf-8")) > MAX_TEXT_MESSAGE_BYTES:
            await self._close(CLOSE_TOO_BIG, f"text message longer than {MAX_TEXT_MESSAGE_BYTES} bytes")
            return False
        try:
            message = parse_client_message(text)
            next_phase = transition(self.phase, message.type)
        except BadMessage as exc:
            await self._send(exc.to_event())
            return True
        if isinstance(message, Finalize):
            await stream.finalize()
        elif isinstance(message, End):
            await stream.send_audio(self._resampler.flush())
            await stream.end()
        self.phase = next_phase
        return True

    async def _wait_for_end(self, sender: asyncio.Task[None]) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(sender), END_WAIT_S)
        except asyncio.TimeoutError:
            await self._close(CLOSE_SERVER_ERROR, f"the last transcripts did not arrive within {END_WAIT_S:.0f} s")

    # ---- server -> client

    async def _relay_events(self, stream: AsrStreamHandle) -> None:
        while True:
            if stream.overflowed:
                await self._close(CLOSE_SERVER_ERROR, "the client is not reading transcript events")
                return
            try:
                item = await asyncio.wait_for(stream.events.get(), 1.0)
            except asyncio.TimeoutError:
                continue
            message = item if isinstance(item, dict) else item.to_dict()
            try:
                await self._send(message)
            except asyncio.TimeoutError:
                await self._close(CLOSE_IDLE, "the client did not read for "
                                              f"{self.settings.idle_timeout_s:.0f} s")
                return
            if isinstance(item, Closed):
                await self._close(CLOSE_NORMAL)
                return
