"""The /v1/dictation socket: audio in, transcript events out.

One ``DictationSession`` per socket. The receiving side (this task) validates
and decodes client messages, resamples audio to 16 kHz and hands it to its
``AsrStream``; a sender task relays the stream's events to the client. Both
end together: on ``end`` (after ``closed``, close 1000), on disconnect, on an
idle client (4408), on a message too big (1009) or a broken client (1011).
Sends are serialised by a lock; every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from engines.base import EngineState

from .asr_client import AsrStream, AsrSupervisor
from .audio import AudioFormatError, PcmDecoder, StreamResampler
from .config import Settings
from .errors import (
    CLOSE_BAD_REQUEST,
    CLOSE_IDLE,
    CLOSE_NORMAL,
    CLOSE_SERVER_ERROR,
    CLOSE_TOO_BIG,
    CLOSE_TRY_AGAIN,
    BadAudio,
    BadMessage,
    BadRequest,
    GatewayError,
)
from .protocol.dictation import (
    MAX_AUDIO_MESSAGE_BYTES,
    MAX_TEXT_MESSAGE_BYTES,
    Closed,
    DictationParams,
    End,
    Finalize,
    Ready,
    parse_client_message,
    parse_dictation_params,
)

log = logging.getLogger("voxgate.dictation")

ASR_START_WAIT_S = 30.0  # a socket opened while the sidecar loads waits this long for it
END_WAIT_S = 120.0  # after ``end``: the last finals may queue behind other streams' decodes
ASR_RATE = 16000


class Phase(str, enum.Enum):
    STREAMING = "streaming"
    ENDING = "ending"  # the client sent ``end``; waiting for the last finals and ``closed``
    CLOSED = "closed"


def close_reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    data = text.encode("utf-8")[:123]
    return data.decode("utf-8", "ignore")


async def dictation_socket(websocket: WebSocket) -> None:
    """The /v1/dictation endpoint."""
    state = websocket.state
    settings: Settings = state.settings
    await websocket.accept()
    try:
        params = parse_dictation_params(websocket.query_params)
    except BadRequest as exc:
        await websocket.close(CLOSE_BAD_REQUEST, close_reason(exc.message))
        return
    session = DictationSession(websocket, params, settings, state.asr)
    client = websocket.client.host if websocket.client else "?"
    entry = state.sessions.add("dictation", client, session.describe)
    if entry is None:
        await websocket.close(CLOSE_TRY_AGAIN, close_reason(
            f"too many dictation streams (limit {settings.max_dictation_streams}); try again later"))
        return
    try:
        await session.run(entry.id)
    finally:
        state.sessions.remove(entry.id)


class DictationSession:
    def __init__(self, websocket: WebSocket, params: DictationParams, settings: Settings,
                 asr: AsrSupervisor | None) -> None:
        self.websocket = websocket
        self.params = params
        self.settings = settings
        self.asr = asr
        self.phase = Phase.STREAMING
        self.stream: AsrStream | None = None
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
        if not await self._check_asr():
            return
        options = {"language": None if self.params.language == "auto" else self.params.language,
                   "interim": self.params.interim, "word_timestamps": self.params.word_timestamps,
                   "silence_ms": self.params.silence_ms}
        assert self.asr is not None
        self.stream = await self.asr.open_stream(options)
        sender = asyncio.create_task(self._relay_events(), name=f"dictation-send-{session_id}")
        try:
            await self._send(Ready(session=session_id, sample_rate=self.params.sample_rate,
                                   encoding=self.params.encoding.value, language=self.params.language,
                                   model=self.asr.model_name).to_dict())
            await self._receive_loop(sender)
        except WebSocketDisconnect:
            pass
        finally:
            if not sender.done():
                sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            await self.stream.close()
            self.phase = Phase.CLOSED

    async def _check_asr(self) -> bool:
        """Refuse the socket (error event + close) when ASR cannot serve it."""
        asr = self.asr
        if asr is None:
            error = GatewayError("ASR is not enabled on this gateway; start it with --engines including asr",
                                 code="engine_unavailable")
            await self._refuse(error, CLOSE_SERVER_ERROR)
            return False
        state = asr.status().state
        if state in (EngineState.MISSING, EngineState.FAILED) or (
                state is EngineState.LOADING and asr.restarts == 0 and not await asr.wait_ready(ASR_START_WAIT_S)):
            await self._refuse(asr.unavailable(), CLOSE_SERVER_ERROR)
            return False
        languages = asr.info()["languages"]
        language = self.params.language
        if language != "auto" and languages and language not in languages:
            shown = ", ".join(languages[:20]) + (" ..." if len(languages) > 20 else "")
            hint = "; install multilingual Whisper base: voxgate models install whisper-base" \
                if languages == ["en"] else ""
            error = BadRequest(f"language: the ASR model {asr.model_name} does not support {language!r} "
                               f"(available: {shown}){hint}", code="unsupported_language")
            await self._refuse(error, CLOSE_BAD_REQUEST)
            return False
        return True

    async def _refuse(self, error: GatewayError, close_code: int) -> None:
        with contextlib.suppress(Exception):
            await self._send(error.to_event())
        await self._close(close_code, error.message)

    async def _close(self, code: int, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self.websocket.close(code, close_reason(reason))

    async def _send(self, message: dict[str, Any]) -> None:
        async with self._send_lock:
            await asyncio.wait_for(self.websocket.send_json(message), self.settings.idle_timeout_s)

    # ---- client -> server

    async def _receive_loop(self, sender: asyncio.Task) -> None:
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
                if not await self._on_audio(message["bytes"]):
                    return
            elif message.get("text") is not None:
                if not await self._on_text(message["text"]):
                    return
        await self._wait_for_end(sender)

    async def _on_audio(self, data: bytes) -> bool:
        if len(data) > MAX_AUDIO_MESSAGE_BYTES:
            await self._close(CLOSE_TOO_BIG, f"audio message of {len(data)} bytes; the limit is "
                                             f"{MAX_AUDIO_MESSAGE_BYTES}, send smaller chunks")
            return False
        try:
            samples = self._decoder.feed(data)
        except AudioFormatError as exc:
            await self._send(BadAudio(f"{exc}; the message was dropped").to_event())
            return True
        assert self.stream is not None
        await self.stream.send_audio(self._resampler.feed(samples))
        return True

    async def _on_text(self, text: str) -> bool:
        if len(text.encode("utf-8")) > MAX_TEXT_MESSAGE_BYTES:
            await self._close(CLOSE_TOO_BIG, f"text message longer than {MAX_TEXT_MESSAGE_BYTES} bytes")
            return False
        try:
            message = parse_client_message(text)
        except BadMessage as exc:
            await self._send(exc.to_event())
            return True
        assert self.stream is not None
        if isinstance(message, Finalize):
            await self.stream.finalize()
        elif isinstance(message, End):
            await self.stream.send_audio(self._resampler.flush())
            self.phase = Phase.ENDING
            await self.stream.end()
        return True

    async def _wait_for_end(self, sender: asyncio.Task) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(sender), END_WAIT_S)
        except asyncio.TimeoutError:
            await self._close(CLOSE_SERVER_ERROR, f"the last transcripts did not arrive within {END_WAIT_S:.0f} s")

    # ---- server -> client

    async def _relay_events(self) -> None:
        stream = self.stream
        assert stream is not None
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
