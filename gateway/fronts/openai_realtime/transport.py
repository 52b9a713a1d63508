"""The ``DictationTransport`` of one OpenAI Realtime transcription socket.

Client events become the dictation session's input: ``input_audio_buffer.append``
its audio (base64 decoded; 24 kHz PCM or G.711 as configured), ``.commit`` a
``finalize`` with an id, ``.clear`` a ``finalize`` whose utterances are then
forgotten (``ItemTracker.clear``). ``session.update`` is answered here, by
``session.updated`` or an ``error``; so are the commit of an empty buffer and
audio that is not base64, as OpenAI answers them.

The session's events become OpenAI's through ``ItemTracker``; its ``ready`` and
``closed`` have no counterpart (``session.created`` went out when the socket
opened), its errors become ``error`` events. Every send goes through one lock:
the session's sender task and this transport's own answers share the socket.

The drain (``begin_drain``; the route asks the session to stop reading at once):
from then on the session reads nothing more, and a reader of this transport
answers every client event with an ``error`` ``draining`` (an append is not
taken: the client sends it again elsewhere), until the session's close. At
that close (1001) without server VAD the audio appended since the last commit
is committed as if the client had, and its ``completed`` goes out first: its
finals are all in by then.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import logging
from typing import Any

from starlette.websockets import WebSocket

from gateway.errors import (
    BadMessage,
    GatewayError,
    TooLarge,
    close_code_for,
    close_socket,
)
from gateway.fronts.openai_realtime.config import TranscriptionConfig, UpdateError, apply_update
from gateway.fronts.openai_realtime.events import ClientEvent, ClientEventError, Events, read_client_event
from gateway.fronts.openai_realtime.items import ItemTracker
from gateway.protocol.common import ErrorEvent
from gateway.protocol.dictation import ClientMessage, Config, Finalize, Finalized, ServerEvent
from gateway.tasks import cancel_and_wait

log = logging.getLogger("voxgate.fronts.openai")

MIN_COMMIT_MS = 100  # OpenAI refuses to commit less audio than this
SERVER_ERROR_CODES = frozenset({"internal_error", "asr_failed", "engine_unavailable", "asr_unavailable",
                                "over_capacity", "draining"})
HANDOVER_S = 5.0  # at the drain, the session's last read ends within this (it is cancelled)
NOT_TAKEN = ("{} was not taken: the server is stopping; the audio appended before the drain is transcribed, "
             "send the rest again on a new connection")


class RealtimeTransport:
    def __init__(self, websocket: WebSocket, config: TranscriptionConfig, languages: list[str],
                 send_timeout_s: float, asr_model: str = "") -> None:
        self.websocket = websocket
        self.config = config
        self.languages = languages
        self.asr_model = asr_model  # the recognizer's own name, a transcription model a client may name
        self.send_timeout_s = send_timeout_s
        self.events = Events()
        self.session_id = f"sess_{self.events.prefix}"
        self.items = ItemTracker(self.events, server_vad=config.turn_detection is not None)
        self.audio_started = False  # the first audio fixed the format and the recognizer's settings
        self._marks = itertools.count(1)
        self._buffered_bytes = 0  # audio appended since the last commit or clear
        self._stash: bytes | None = None
        self._lock = asyncio.Lock()
        self.draining = False
        self.drain_begun = asyncio.Event()
        self._reader_free = asyncio.Event()  # no read of the socket is in flight
        self._reader_free.set()
        self._refuser: asyncio.Task[None] | None = None

    # ---- before the dictation session exists

    async def first_audio(self) -> bool:
        """Answer configuration events until the first audio arrives (kept for
        ``receive``); False when the client left first."""
        while True:
            try:
                message = await self._next()
            except TooLarge as exc:
                await self.close(exc.close_code, exc.message)
                return False
            except GatewayError as exc:
                await self.send_error(exc)
                continue
            if message is None:
                return False
            if isinstance(message, bytes):
                self._stash = message
                self.audio_started = True
                return True
            # a commit or clear before any audio: answered already, nothing to finalize

    # ---- client -> session

    async def receive(self) -> bytes | ClientMessage | None:
        if self._stash is not None:
            data, self._stash = self._stash, None
            return data
        return await self._next()

    async def _next(self) -> bytes | ClientMessage | None:
        while True:
            if self.draining:  # the refusing reader has the socket now; the session cancels this read
                await asyncio.get_running_loop().create_future()
            self._reader_free.clear()
            try:
                message = await self.websocket.receive()
            finally:
                self._reader_free.set()
            if message["type"] == "websocket.disconnect":
                return None
            text = message.get("text")
            if text is None:
                raise BadMessage("binary frames are not accepted; send input_audio_buffer.append events with "
                                 "base64 audio")
            event: ClientEvent | None = None
            try:
                event = read_client_event(text)  # TooLarge, raised before parsing, ends the session 1009
                result = await self._handle(event)
            except BadMessage as exc:
                # answered here, with the client's event_id, as OpenAI answers an event it cannot take
                if isinstance(exc, ClientEventError):
                    event_id = exc.event_id
                else:
                    event_id = event.event_id if event is not None else None
                await self._send(self.events.error(exc.code, exc.message, event_id=event_id))
                continue
            if result is not None:
                return result

    async def _handle(self, event: ClientEvent) -> bytes | ClientMessage | None:
        """The session's input for one client event, or None when it was answered here."""
        if event.type == "session.update":
            return await self._update(event)
        if event.type == "input_audio_buffer.append":
            return await self._append(event)
        mark = f"m{next(self._marks)}"
        if event.type == "input_audio_buffer.commit":
            buffered_ms = self._buffered_bytes / self._bytes_per_second() * 1000
            if buffered_ms < MIN_COMMIT_MS:
                await self._send(self.events.error(
                    "input_audio_buffer_commit_empty",
                    f"Error committing input audio buffer: buffer too small. Expected at least {MIN_COMMIT_MS}ms "
                    f"of audio, but buffer only has {buffered_ms:.2f}ms of audio.", event_id=event.event_id))
                return None
            self._buffered_bytes = 0
            for out in self.items.commit(mark):
                await self._send(out)
            return Finalize(id=mark) if self.audio_started else None
        self._buffered_bytes = 0  # input_audio_buffer.clear
        self.items.clear()
        await self._send(self.events.cleared())
        return Finalize(id=mark) if self.audio_started else None

    async def _update(self, event: ClientEvent) -> Config | None:
        """Apply a ``session.update``; a new prompt or keywords after the first audio
        go on to the running session as its new vocabulary."""
        try:
            config = apply_update(self.config, event.data.get("session"), self.languages, self.asr_model)
            if self.audio_started:
                self._check_fixed(config)
        except UpdateError as exc:
            await self._send(self.events.error(exc.code, str(exc), param=exc.param, event_id=event.event_id))
            return None
        changed = config.decoder_prompt != self.config.decoder_prompt
        self.config = config
        self.items.set_server_vad(config.turn_detection is not None)
        await self._send(self.events.session_updated(config.session_object(self.session_id)))
        return Config(config.decoder_prompt, terms=config.keywords) if changed and self.audio_started else None

    def _check_fixed(self, new: TranscriptionConfig) -> None:
        """After the first audio the recognizer runs with the format, language and
        silence it was started with; the rest (VAD on or off, the reported model,
        prompt, noise reduction) may still change."""
        old = self.config
        fixed = (("session.audio.input.format", "the audio format", new.format != old.format),
                 ("session.audio.input.transcription.language", "the language", new.language != old.language),
                 ("session.audio.input.turn_detection.silence_duration_ms", "silence_duration_ms",
                  new.turn_detection is not None and old.turn_detection is not None
                  and new.turn_detection.silence_duration_ms != old.turn_detection.silence_duration_ms))
        for param, what, changed in fixed:
            if changed:
                raise UpdateError(param, f"{what} cannot change after audio was appended; open a new session "
                                  "to change it")

    async def _append(self, event: ClientEvent) -> bytes | None:
        audio = event.data.get("audio")
        if not isinstance(audio, str):
            raise BadMessage("input_audio_buffer.append.audio must be a base64 string")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            await self._send(self.events.error("invalid_value", "input_audio_buffer.append.audio is not valid "
                                               "base64", param="audio", event_id=event.event_id))
            return None
        if not data:
            return None
        self._buffered_bytes += len(data)
        return data

    def _bytes_per_second(self) -> int:
        config = self.config
        return config.sample_rate * (2 if config.format == "audio/pcm" else 1)

    # ---- session -> client

    async def send_event(self, event: ServerEvent, timeout_s: float) -> None:
        if isinstance(event, ErrorEvent):
            if event.code == "asr_unavailable" and event.retryable:
                # the recognizer restarts and replays the audio: nothing is lost, the
                # client need not act (OpenAI clients treat every error as fatal)
                log.info("ASR sidecar restarting under an OpenAI Realtime session")
                return
            kind = "server_error" if event.code in SERVER_ERROR_CODES else "invalid_request_error"
            await self._send(self.events.error(event.code, event.message, kind=kind), timeout_s)
            return
        for out in self.items.on_event(event):
            await self._send(out, timeout_s)

    async def send_session_created(self) -> None:
        await self._send(self.events.session_created(self.config.session_object(self.session_id)))

    async def send_error(self, exc: GatewayError) -> None:
        kind = "server_error" if exc.code in SERVER_ERROR_CODES else "invalid_request_error"
        await self._send(self.events.error(exc.code, exc.message, kind=kind))

    async def _send(self, event: dict[str, Any], timeout_s: float | None = None) -> None:
        async with self._lock:
            await asyncio.wait_for(self.websocket.send_json(event), timeout_s or self.send_timeout_s)

    async def close(self, code: int, reason: str) -> None:
        if code == close_code_for("going_away") and self.draining:
            with contextlib.suppress(Exception):  # the client left: the close below is a no-op then
                await self._commit_at_drain()
        await self.stop_refusing()
        await close_socket(self.websocket, code, reason)

    # ---- the drain

    def begin_drain(self) -> None:
        """Take no more client events: from now on each is answered ``draining``."""
        self.draining = True
        self.drain_begun.set()
        if self.audio_started and self._refuser is None:  # before any audio the route closes the socket at once
            self._refuser = asyncio.get_running_loop().create_task(self._refuse(), name="realtime-draining")

    async def _refuse(self) -> None:
        try:
            await asyncio.wait_for(self._reader_free.wait(), HANDOVER_S)
        except asyncio.TimeoutError:
            return
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            event_id = None
            try:
                event = read_client_event(message.get("text") or "")
            except TooLarge as exc:  # the session closes 1001 soon: this is answered, the drain goes on
                await self._send(self.events.error(exc.code, exc.message))
                continue
            except BadMessage as exc:
                event_id = exc.event_id if isinstance(exc, ClientEventError) else None
                await self._send(self.events.error(exc.code, exc.message, event_id=event_id))
                continue
            await self._send(self.events.error("draining", NOT_TAKEN.format(event.type), kind="server_error",
                                               event_id=event.event_id))

    async def stop_refusing(self) -> None:
        refuser, self._refuser = self._refuser, None
        if refuser is not None:
            await cancel_and_wait([refuser], HANDOVER_S)

    async def _commit_at_drain(self) -> None:
        """Without server VAD, the drain commits what was appended since the last commit."""
        if self.items.server_vad or not self._buffered_bytes:
            return
        self._buffered_bytes = 0
        mark = f"m{next(self._marks)}"
        for out in [*self.items.commit(mark), *self.items.on_event(Finalized(mark, None))]:
            await self._send(out)
