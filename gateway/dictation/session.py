"""A dictation session: audio in, transcript events out, one per socket. It
talks to its client only through a ``DictationTransport``
(gateway/dictation/transport.py), so /v1/dictation and every front share it.

The receiving side (the task that runs ``DictationSession.run``) validates
client messages, has their audio decoded and resampled to 16 kHz off the loop a
step at a time (gateway/dictation/audio_in.py) and hands each step to its ASR
stream, paced; a sender task relays the stream's typed events to the transport
(gateway/dictation/relay.py), which turns them into its wire form. Both end
together: on ``end`` (after ``closed``, close 1000), on disconnect, on an idle
client (4408), on a message too big (1009), on a container stream (webm,
ogg) that cannot be read on (4400) or a broken client (1011). Sends
are serialised by the relay's ``Outbox``; every wait has a timeout.

The session's phase is explicit and ``TRANSITIONS`` says which client message
each phase accepts; anything else is a ``bad_message``.

Drain (``drain``, called by the registry before a stop): the stream goes on
until no utterance is open (every ``speech_started`` has its ``final``), so a
speaker is not cut mid-sentence; then the session stops reading, finalizes
everything it has read (a mark answered by the sidecar once every final of
that audio is out), sends those finals and closes 1001. At the drain's
deadline it does the same at once. Every word read before the close is in a
``final``; the close reason tells the client to reconnect and retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocketDisconnect

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from engines.base import AsrService, AsrStreamHandle, EngineState
from gateway.audio import AudioFormatError
from gateway.config import Settings
from gateway.dictation.asr_gate import asr_refusal, language_refusal
from gateway.dictation.audio_in import AudioPath
from gateway.dictation.faults import unavailable_error
from gateway.dictation.pacing import Pacer
from gateway.dictation.relay import Drain, Outbox, relay_events
from gateway.dictation.resumable import ResumableTransport
from gateway.dictation.transport import DictationTransport
from gateway.engine_view import public_model_name
from gateway.errors import BadAudio, BadMessage, GatewayError, TooLarge, close_code_for
from gateway.protocol.common import End, ErrorEvent
from gateway.protocol.dictation import ClientMessage, Config, DictationParams, Finalize, Ready

log = logging.getLogger("voxgate.dictation")

ASR_START_WAIT_S = 30.0  # a socket opened while the sidecar loads waits this long for it
END_WAIT_S = 120.0  # after ``end``: the last finals may queue behind other streams' decodes
AUDIO = "audio"  # the transition name of a binary message


class Phase(str, enum.Enum):
    STREAMING = "streaming"
    ENDING = "ending"  # the client sent ``end``; waiting for the last finals and ``closed``
    DRAINING = "draining"  # the server stops: reading is over, waiting for the last finals, then 1001
    CLOSED = "closed"


# Which client messages each phase accepts, and the phase they lead to.
TRANSITIONS: dict[Phase, dict[str, Phase]] = {
    Phase.STREAMING: {AUDIO: Phase.STREAMING, "finalize": Phase.STREAMING, "config": Phase.STREAMING,
                      "keepalive": Phase.STREAMING, "end": Phase.ENDING},
    Phase.ENDING: {},
    Phase.DRAINING: {},
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

    def __init__(self, transport: DictationTransport, params: DictationParams, settings: Settings,
                 asr: AsrService | None, *, idle_timeout_s: float | None = None) -> None:
        self.transport = transport
        self.params = params
        self.settings = settings
        self.asr = asr
        # a front may hold its clients to its vendor's idle rule instead of the gateway's
        self.idle_timeout_s = idle_timeout_s if idle_timeout_s is not None else settings.idle_timeout_s
        self.phase = Phase.STREAMING
        self.stream: AsrStreamHandle | None = None
        # raises CodecUnavailable (a GatewayError) when FFmpeg is missing: the route refuses the socket
        self._audio = AudioPath(params.encoding, params.sample_rate)
        self._pacer = Pacer(settings.dictation_max_ahead_s)
        self._sender: asyncio.Task[None] | None = None
        self._out = Outbox(transport, self.idle_timeout_s)
        self._drain = Drain()  # the drain: finalize what was read and close
        self._pacing_off: asyncio.Future[None] | None = None  # done: no more pacing (the sender ended, or end_pacing)

    def describe(self) -> dict[str, Any]:
        stream = self.stream
        return {"phase": self.phase.value, "sample_rate": self.params.sample_rate,
                "language": self.params.language,
                "audio_s": round(stream.audio_s, 3) if stream else 0.0,
                "utterances": stream.finals if stream else 0,
                "lag_s": round(stream.lag_s, 3) if stream else 0.0,
                "ahead_s": round(self._pacer.ahead_s, 3), "idle_timeout_s": self.idle_timeout_s}

    # ---- lifecycle

    def drain(self, now: bool) -> None:
        """Stop reading once no utterance is open (``now``: at once), then send the
        last finals and close 1001."""
        self._drain.begin(now)

    def end_pacing(self) -> None:
        """Stop holding audio to real time from now on (a pause under way ends): a
        front whose server drains reads the rest of what it took at once."""
        if self._pacing_off is None:
            self._pacing_off = asyncio.get_running_loop().create_future()
        if not self._pacing_off.done():
            self._pacing_off.set_result(None)

    async def run(self, session_id: str, release_slot: Callable[[], None] | None = None) -> None:
        """Run the session to its close. ``release_slot`` (idempotent) frees its
        capacity slot; it is called before ``closed`` is sent."""
        asr = await self._usable_asr()
        if asr is None:
            return
        options = {"language": None if self.params.language == "auto" else self.params.language,
                   "interim": self.params.interim, "word_timestamps": self.params.word_timestamps,
                   "silence_ms": self.params.silence_ms, "eager": self.params.eager, "prompt": self.params.prompt,
                   "terms": list(self.params.terms),
                   **({"turn_threshold": turn} if (turn := self.params.turn_threshold) is not None else {})}
        self.stream = stream = await asr.open_stream(options)
        sender = asyncio.create_task(relay_events(stream, self._out, self._drain, release_slot),
                                     name=f"dictation-send-{session_id}")
        self._sender = sender
        if self._pacing_off is None:
            self._pacing_off = asyncio.get_running_loop().create_future()
        sender.add_done_callback(lambda _: self.end_pacing())
        try:
            # a container carries its own rate: ready tells the one its audio decodes at
            rate = self._audio.decoder.sample_rate if self.params.encoding.is_container else self.params.sample_rate
            await self._out.send(Ready(session=session_id, sample_rate=rate, encoding=self.params.encoding.value,
                                       language=self.params.language, model=public_model_name(asr.model_name)))
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
        refusal: GatewayError | None = asr_refusal(asr)
        if asr is not None and refusal is None:
            if asr.status().state is EngineState.LOADING and asr.restarts == 0 \
                    and not await asr.wait_ready(ASR_START_WAIT_S):
                refusal = unavailable_error(asr.status())
            else:
                refusal = language_refusal(asr, self.params.language, install_hint=True)
        if refusal is not None:
            await self._out.refuse(refusal)
            return None
        return asr

    # ---- client -> server

    async def _receive_loop(self, stream: AsrStreamHandle, sender: asyncio.Task[None]) -> None:
        stop = asyncio.ensure_future(self._drain.stop_reading.wait())
        try:
            if not await self._read_until_end(stream, sender, stop):
                return
        finally:
            stop.cancel()
        await self._wait_for_end(sender)

    async def _read_until_end(self, stream: AsrStreamHandle, sender: asyncio.Task[None],
                              stop: asyncio.Future[Any]) -> bool:
        """Read the client until ``end`` or the drain (True: wait for the last
        events), or until the session is over (False)."""
        idle_s = self.idle_timeout_s
        receive: asyncio.Future[bytes | ClientMessage | None] | None = None
        while self.phase is Phase.STREAMING:
            receive = receive or asyncio.ensure_future(self.transport.receive())
            waits: set[asyncio.Future[Any]] = {receive, sender, stop}
            done, _ = await asyncio.wait(waits, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED)
            if not done and self._held():
                continue  # the client dropped and may resume: the transport's grace bounds the wait
            if receive not in done:
                receive.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await receive
                if sender in done:
                    return False  # the sender closed the socket (broken client or sidecar error)
                if stop in done:
                    self.phase = Phase.DRAINING
                    await stream.send_audio(await self._audio.flush())
                    await stream.finalize(self._drain.mark)
                    return True
                await self._out.close(close_code_for("idle_timeout"), f"no audio or message for {idle_s:.0f} s")
                return False
            try:
                message = receive.result()
                receive = None
            except TooLarge as exc:
                await self._out.close(exc.close_code, exc.message)
                return False
            except GatewayError as exc:
                receive = None
                await self._out.send(ErrorEvent.of(exc))
                continue
            if message is None:
                return False
            if isinstance(message, bytes):
                if not await self._on_audio(stream, message):
                    return False
            else:
                await self._on_message(stream, message)
        return True

    def _held(self) -> bool:
        """True while a resumable session's client is away (gateway/dictation/resumable.py)."""
        return isinstance(self.transport, ResumableTransport) and self.transport.away

    async def _on_audio(self, stream: AsrStreamHandle, data: bytes) -> bool:
        """Decode ``data`` off the loop a step at a time, each step handed to the
        recognizer and paced before the next is decoded. False when the session
        must end (the close is decided)."""
        self.phase = transition(self.phase, AUDIO)
        steps = self._audio.steps(data)
        while True:
            try:
                audio = await self._audio.next_step(steps)
            except AudioFormatError as exc:
                return await self._bad_audio(exc)
            except GatewayError as exc:  # FFmpeg turned out to be missing at the stream's header
                await self._out.refuse(exc)
                return False
            if audio is None:
                return True
            await stream.send_audio(audio)
            sender, pacing_off = self._sender, self._pacing_off
            if sender is not None and pacing_off is not None:  # past the pace limit, stop decoding and reading
                await self._pacer.hold(len(audio) / ASR_RATE, pacing_off)
                if sender.done():
                    return False  # the sender closed the socket meanwhile

    async def _bad_audio(self, exc: AudioFormatError) -> bool:
        """Raw audio (PCM, G.711, one Opus packet a message): that message is
        dropped and the stream goes on. A container stream (webm, ogg) cannot be
        read past a framing error: ``bad_audio``, then close 4400 with the reason."""
        if not self.params.encoding.is_container:
            await self._out.send(ErrorEvent.of(BadAudio(f"{exc}; the message was dropped")))
            return True
        error = BadAudio(f"{exc}; the {self.params.encoding.value} stream cannot be read past this point")
        await self._out.send(ErrorEvent.of(error))
        await self._out.close(close_code_for("bad_request"), error.message)
        return False

    async def _on_message(self, stream: AsrStreamHandle, message: ClientMessage) -> None:
        try:
            next_phase = transition(self.phase, message.type)
        except BadMessage as exc:
            await self._out.send(ErrorEvent.of(exc))
            return
        if isinstance(message, Finalize):
            await stream.finalize(message.id)
        elif isinstance(message, Config):
            await stream.configure(message.prompt, message.reset_context, message.terms)
        elif isinstance(message, End):
            audio, error = await self._audio.end()
            if error is not None:  # a stream cut inside a packet: the rest still ends normally
                await self._out.send(ErrorEvent.of(BadAudio(f"{error}; the end of the stream was dropped")))
            await stream.send_audio(audio)
            await stream.end()
        self.phase = next_phase

    async def _wait_for_end(self, sender: asyncio.Task[None]) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(sender), END_WAIT_S)
        except asyncio.TimeoutError:
            await self._out.close(close_code_for("internal_error"),
                                  f"the last transcripts did not arrive within {END_WAIT_S:.0f} s")
