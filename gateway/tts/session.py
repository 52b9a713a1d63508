"""A TTS session: text in, audio frames out, one per socket (or per context of
a front that multiplexes several). It talks to its client only through a
``TtsTransport`` (gateway/tts/transport.py), so /v1/tts and every front share it.

Four tasks, all owned by ``TtsSession.run`` (which cancels and awaits them):

- the receiver reads client messages and drives the state machine;
- the synthesizer takes utterances in order, opens an engine stream for each
  and puts its frames, converted to the socket's rate and encoding, into the
  outbound queue the moment the engine yields them;
- the sender sends the outbound queue in order (frames and events);
- the watchdog closes a stalled client (a send blocked for ``idle_timeout_s``)
  or an idle one (no message and nothing to do for ``idle_timeout_s``) with 4408.

Drain (``drain``, called by the registry before a stop): what the client sent
is finished (the text buffer is flushed, every queued utterance is spoken),
new ``speak``/``text`` are refused with a ``draining`` error, then the session
closes 1001; at the deadline it stops at the next frame and closes 1001.

Backpressure: the outbound queue holds at most ``max_buffer_s`` of audio, so a slow
reader pauses only its own synthesizer; the engine's batch scheduler goes on with every other stream.

Longer than 300 lines: the four tasks are one concept, sharing the queue, the live
utterances and the state machine whose invariants hold only read together.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocketDisconnect

from engines.base import EngineError, SynthesisOptions, TtsEngine
from gateway.codecs.formats import OutputFormat
from gateway.errors import (
    BadMessage,
    GatewayError,
    TooLarge,
    close_code_for,
)
from gateway.protocol.common import Closed, End, Keepalive
from gateway.protocol.tts import Cancel, Cancelled, ClientMessage, Flush, Flushed, Speak, Start, TextFragment
from gateway.tasks import cancel_and_wait
from gateway.tts.frames import FrameEncoder
from gateway.tts.outbound import OutboundQueue, OutItem, Stalled
from gateway.tts.selection import check_options, gateway_error, resolve_voice
from gateway.tts.sentences import SentenceBuffer
from gateway.tts.states import GOING_AWAY_REASON, Closing, SessionConfig, TtsState, transition
from gateway.tts.timeline import PlayTimeline
from gateway.tts.transport import TtsTransport, VoicingTransport
from gateway.tts.utterance import DRAIN_MARK, END_OF_WORK, DrainMark, EndOfWork, FlushMark, QueueItem, Utterance

log = logging.getLogger("voxgate.tts")


@dataclass
class TtsSession:
    """One TTS session after ``ready`` was decided. ``run()`` owns everything."""

    transport: TtsTransport
    engine: TtsEngine
    voice: str | None
    sample_rate: int
    encoding: OutputFormat
    config: SessionConfig
    state: TtsState = TtsState.OPEN
    # SynthesisOptions.extra for every utterance (a front's per-request options, e.g. Wyoming's speaker);
    # an utterance's own options win
    engine_options: dict[str, str] = field(default_factory=dict)
    # whether the client is away from a resumable session (gateway/tts/resumable.py): while it is, the
    # session waits for it (bounded by the transport's grace) instead of closing it as idle or stalled
    away: Callable[[], bool] = field(default=lambda: False)
    _pending: deque[QueueItem] = field(default_factory=deque)  # not started yet
    _live: list[Utterance] = field(default_factory=list)  # queued or not fully sent
    _next_id: int = 0
    utterances_done: int = 0
    frames_sent: int = 0
    samples_sent: int = 0

    def __post_init__(self) -> None:
        info = self.engine.info()
        self._native_rate = info.sample_rate
        self._buffer = SentenceBuffer(self.config.limits.max_chars)
        self.outbound = OutboundQueue(max_samples=int(self.config.max_buffer_s * self.sample_rate))
        self._work = asyncio.Event()
        self._sending_since: float | None = None
        self._last_activity = time.monotonic()
        self._synthesizing: Utterance | None = None
        self._halt: Closing | None = None  # set at the drain's deadline; the watchdog acts on it
        self.timeline = PlayTimeline(self.sample_rate, self._native_rate)

    # ---- lifecycle

    async def run(self) -> None:
        """Serve the socket until ``end`` is done, the client leaves, or a close is decided."""
        tasks = {asyncio.create_task(coro, name=name) for name, coro in (
            ("tts-receive", self._receive_loop()), ("tts-synth", self._synth_loop()),
            ("tts-send", self._send_loop()), ("tts-watch", self._watch()))}
        closing: Closing | None = None
        try:
            while closing is None and tasks:
                done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    closing = closing or self._outcome(task)
        finally:
            self.state = TtsState.CLOSING
            try:
                # asyncio.wait inside, not gather: our own cancellation must propagate unchanged
                stuck = await cancel_and_wait(tasks, self.config.close_timeout_s)
                if stuck:
                    log.error("TTS session tasks did not end: %s", ", ".join(t.get_name() for t in stuck))
            finally:  # even when the session itself is cancelled meanwhile: no engine stream outlives it
                for stream in [u.stream for u in self._live if u.stream is not None]:
                    stream.cancel()
        if closing is not None and closing.code is not None:
            await self.transport.close(closing.code, closing.reason, self.config.close_timeout_s)

    def _outcome(self, task: asyncio.Task[Closing | None]) -> Closing | None:
        if task.cancelled():
            return Closing(close_code_for("internal_error"), "internal error")
        exc = task.exception()
        if exc is not None:
            log.error("TTS session task %s failed", task.get_name(), exc_info=exc)
            return Closing(close_code_for("internal_error"), "internal error")
        return task.result()

    def describe(self) -> dict[str, Any]:
        """Live counters for /v1/admin/sessions."""
        now = time.monotonic()
        return {"engine": self.engine.info().id, "voice": self.voice, "state": self.state.value,
                "sample_rate": self.sample_rate, "utterances": self.utterances_done,
                "pending_utterances": sum(1 for p in self._pending if isinstance(p, Utterance)),
                "frames_sent": self.frames_sent, "audio_s_sent": round(self.samples_sent / self.sample_rate, 3),
                "queued_audio_s": round(self.outbound.queued_samples / self.sample_rate, 3),
                "send_blocked_s": round(now - self._sending_since, 3) if self._sending_since else 0.0}

    # ---- receiver

    async def _receive_loop(self) -> Closing | None:
        while True:
            try:
                msg = await self.transport.receive()
                if msg is None:
                    return Closing(None)
                self._last_activity = time.monotonic()
                self.handle(msg)
            except TooLarge as exc:
                return Closing(exc.close_code, exc.message)
            except GatewayError as exc:
                self._last_activity = time.monotonic()
                if not self._emit(exc.to_event()):
                    return Closing(close_code_for("idle_timeout"), "client is not reading")
            except Stalled:
                return Closing(close_code_for("idle_timeout"), "client is not reading")

    def handle(self, msg: ClientMessage) -> None:
        """Apply one parsed client message. Raises ``GatewayError`` for the client."""
        new_state = transition(self.state, msg.type)
        if isinstance(msg, Speak):
            voice = resolve_voice(self.engine, msg.voice) if msg.voice is not None else self.voice
            check_options(self.engine, msg.seed, msg.engine_options(), prefix="speak.", error=BadMessage)
            self._check_queue_room()
            self._enqueue(msg.text, voice, msg.seed, msg.id, msg.engine_options())
        elif isinstance(msg, TextFragment):
            before = self._buffer.pending
            sentences = self._buffer.append(msg.text)
            try:  # every sentence is an utterance: one message must not overrun the queue
                self._check_queue_room(len(sentences))
            except BadMessage:
                self._buffer.restore(before)
                raise
            for sentence in sentences:
                self._enqueue(sentence, self.voice, None, None)
        elif isinstance(msg, Flush):
            self._flush_buffer()
            if msg.id is not None:
                self._queue(FlushMark(msg.id))
        elif isinstance(msg, Cancel):
            if msg.played_ms is not None:
                self.timeline.check(msg.played_ms)
            self._cancel_all(msg.played_ms)
        elif isinstance(msg, End):
            self._flush_buffer()
            self._unqueue_drain()
            self._pending.append(END_OF_WORK)
            self._work.set()
        elif isinstance(msg, Keepalive):
            pass
        self.state = new_state

    def _check_queue_room(self, adding: int = 1) -> None:
        queued = sum(1 for p in self._pending if isinstance(p, Utterance))
        limit = self.config.max_queued_utterances
        if queued >= limit:
            raise BadMessage(f"{queued} utterances are already queued (the limit is {limit}); "
                             "wait for an \"end\" event", code="too_many_utterances")
        if queued + adding > limit:
            raise BadMessage(f"this text holds {adding} sentences and {queued} utterances are queued (the limit "
                             f"is {limit}); nothing of it was taken: send less at once, or wait for \"end\" events",
                             code="too_many_utterances")

    def _flush_buffer(self) -> None:
        rest = self._buffer.flush()
        if rest:
            self._enqueue(rest, self.voice, None, None)

    def _enqueue(self, text: str, voice: str | None, seed: int | None, utt_id: str | None,
                 options: dict[str, str] | None = None) -> None:
        self._next_id += 1
        utt = Utterance(id=utt_id or f"u{self._next_id}", text=text, voice=voice, seed=seed,
                        options={**self.engine_options, **(options or {})})
        self._queue(utt)
        self._live.append(utt)

    def _queue(self, item: QueueItem) -> None:
        """Queue ``item``; a drain's mark stays last."""
        if self._pending and isinstance(self._pending[-1], DrainMark):
            self._pending.insert(len(self._pending) - 1, item)
        else:
            self._pending.append(item)
        self._work.set()

    def _unqueue_drain(self) -> None:
        if self._pending and isinstance(self._pending[-1], DrainMark):
            self._pending.pop()

    # ---- drain

    def drain(self, now: bool) -> None:
        """Finish the work taken so far, then close 1001; ``now``: stop at once."""
        if self.state is TtsState.OPEN:
            self._flush_buffer()
            self._pending.append(DRAIN_MARK)
            self._work.set()
            self.state = TtsState.DRAINING
        if now and self.state is not TtsState.CLOSING:
            self._halt = Closing(close_code_for("going_away"), GOING_AWAY_REASON)

    def _cancel_all(self, played_ms: int | None = None) -> None:
        heard = self.timeline.rebase(played_ms, self._live[0] if self._live else None)
        head = heard.utterance
        for utt in self._live:
            utt.cancelled = True
            if utt.stream is not None:
                utt.stream.cancel()
        self._live.clear()
        self._pending.clear()
        if self.state is TtsState.DRAINING:  # nothing is left to finish: the close comes next
            self._pending.append(DRAIN_MARK)
            self._work.set()
        self._buffer.clear()
        self.outbound.purge(lambda item: isinstance(item.owner, Utterance) and item.owner.cancelled)
        self.outbound.wake()
        def event() -> dict[str, Any]:
            utt_id, frames = (head.id, head.frames_sent) if head is not None else (None, 0)
            if played_ms is None:
                return Cancelled(utt_id, frames).to_dict()
            return Cancelled(utt_id, frames, heard.played_ms, heard.spoken, heard.remaining).to_dict()

        self.outbound.put_event(OutItem(event=event))

    def _emit(self, event: dict[str, Any] | Callable[[], dict[str, Any]], owner: Utterance | None = None,
              final: bool = False) -> bool:
        try:
            self.outbound.put_event(OutItem(owner=owner, event=event, final=final))
        except Stalled:
            return False
        return True

    # ---- synthesizer

    async def _synth_loop(self) -> Closing | None:
        while True:
            while not self._pending:
                self._work.clear()
                await self._work.wait()
            item = self._pending.popleft()
            if isinstance(item, EndOfWork):
                self._emit(lambda: Closed(self.utterances_done, self.samples_sent / self.sample_rate).to_dict(),
                           final=True)
                return None
            if isinstance(item, FlushMark):
                self._emit(Flushed(item.id).to_dict())
                continue
            if isinstance(item, DrainMark):  # sent after everything before it, then the close
                self.outbound.put_event(OutItem(final=True, close=(close_code_for("going_away"), GOING_AWAY_REASON)))
                return None
            if item.cancelled:
                continue
            try:
                await self._synthesize(item)
            except Stalled:
                idle_s = self.config.idle_timeout_s
                return Closing(close_code_for("idle_timeout"), f"client read no audio for {idle_s:g} s")

    async def _synthesize(self, utt: Utterance) -> None:
        try:
            stream = self.engine.open_stream(utt.text, utt.voice, SynthesisOptions(seed=utt.seed, extra=utt.options))
        except EngineError as exc:
            self._fail(utt, gateway_error(exc))
            return
        utt.stream, utt.started_at, self._synthesizing = stream, time.monotonic(), utt
        self._emit(Start(utt.id, utt.text).to_dict(), owner=utt)
        encoder = FrameEncoder(self._native_rate, self.sample_rate, self.encoding)
        frames = stream.frames()
        wait_s = 2 * self.config.idle_timeout_s  # the watchdog normally decides first
        try:
            async for frame in frames:
                if utt.cancelled:
                    break
                utt.samples_generated += len(frame)
                if not await self._put_audio(utt, encoder.feed(frame), wait_s):
                    break
            else:
                if not utt.cancelled:
                    await self._put_audio(utt, encoder.finish(), wait_s)
                    utt.synth_done_at = time.monotonic()
                    self._emit(lambda: self._finish(utt), owner=utt)
        except EngineError as exc:
            self._fail(utt, gateway_error(exc))
        finally:
            self._synthesizing = None
            stream.cancel()
            aclose = getattr(frames, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _put_audio(self, utt: Utterance, messages: list[tuple[bytes, int]], wait_s: float) -> bool:
        """Queue the messages of one frame; False once the utterance is cancelled."""
        for data, samples in messages:
            item = OutItem(owner=utt, data=data, samples=samples)
            if not await self.outbound.put_audio(item, wait_s, lambda: not utt.cancelled, patient=self.away):
                return False
        return not utt.cancelled

    def _fail(self, utt: Utterance, exc: GatewayError) -> None:
        if utt in self._live:
            self._live.remove(utt)
        self._emit({**exc.to_event(), "id": utt.id})

    def _finish(self, utt: Utterance) -> dict[str, Any]:
        """The utterance's ``end`` event, built when it is sent (counters are final then)."""
        if utt in self._live:
            self._live.remove(utt)
        self.utterances_done += 1
        return utt.end_event(self._native_rate, self.sample_rate).to_dict()

    # ---- sender

    async def _send_loop(self) -> Closing | None:
        while True:
            item = await self.outbound.get()
            self._sending_since = time.monotonic()
            try:
                if item.data is not None:
                    if isinstance(self.transport, VoicingTransport):
                        self.transport.voicing(item.owner.stream, self._native_rate)
                    await self.transport.send_audio(item.data)
                    self._count_sent(item)
                elif item.event is not None:
                    await self.transport.send_event(item.event_dict())
            except (WebSocketDisconnect, RuntimeError, OSError):
                return Closing(None)
            finally:
                self._sending_since = None
            self._last_activity = time.monotonic()
            if item.final:
                return Closing(*item.close) if item.close is not None else Closing(close_code_for("normal_end"))

    def _count_sent(self, item: OutItem) -> None:
        utt: Utterance = item.owner
        if utt.first_sent_at is None:
            utt.first_sent_at = time.monotonic()
        self.timeline.sent(utt, item.samples)
        utt.frames_sent += 1
        utt.samples_sent += item.samples
        self.frames_sent += 1
        self.samples_sent += item.samples

    # ---- watchdog

    async def _watch(self) -> Closing | None:
        idle_s = self.config.idle_timeout_s
        tick_s = min(1.0, idle_s / 4)
        while True:
            await asyncio.sleep(tick_s)
            if self._halt is not None:
                return self._halt
            now = time.monotonic()
            if self.away():  # the transport's grace bounds the wait for the client
                self._last_activity = now
                if self._sending_since is not None:
                    self._sending_since = now
                continue
            if self._sending_since is not None and now - self._sending_since > idle_s:
                return Closing(close_code_for("idle_timeout"), f"client read nothing for {idle_s:g} s")
            if self._is_idle() and now - self._last_activity > idle_s:
                return Closing(close_code_for("idle_timeout"),
                               f"idle: no message for {idle_s:g} s (send keepalive to stay open)")

    def _is_idle(self) -> bool:
        return (self.state is TtsState.OPEN and not self._pending and self._synthesizing is None
                and not len(self.outbound) and self._sending_since is None)
