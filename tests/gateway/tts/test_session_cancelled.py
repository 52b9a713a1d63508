"""A TTS session cancelled from outside while it ends its own tasks still stops
its engine stream: no stream outlives the session."""

from __future__ import annotations

import asyncio
import json

from gateway.codecs.formats import OutputFormat
from gateway.protocol.tts import ClientMessage, Speak, TextLimits
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig, TtsState
from tests.gateway.fakes import FakeTtsEngine
from tests.support.waiting import eventually

LIMITS = TextLimits()


class StubbornTransport:
    """Hands out one ``speak``, then waits for a message forever and swallows the
    first cancellation of that wait (as a task whose cancellation got lost does),
    so the session is still ending its tasks when its own cancellation arrives."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._given = False
        self._swallowed = False

    async def receive(self) -> ClientMessage | None:
        if not self._given:
            self._given = True
            return Speak(text="endless", id="u")
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if self._swallowed:
                    raise
                self._swallowed = True

    async def send_audio(self, data: bytes) -> None:
        await asyncio.sleep(0)

    async def send_event(self, event: dict) -> None:
        self.sent.append(json.dumps(event))

    async def close(self, code: int, reason: str, timeout_s: float) -> None:
        return None


async def test_a_session_cancelled_while_it_ends_its_tasks_still_stops_the_engine_stream() -> None:
    engine = FakeTtsEngine(frame_delay_s=0.01, frames_by_text={"endless": 100_000})
    session = TtsSession(transport=StubbornTransport(), engine=engine, voice=None, sample_rate=24000,
                         encoding=OutputFormat.PCM_S16LE, config=SessionConfig(limits=LIMITS, close_timeout_s=30.0))
    running = asyncio.create_task(session.run())
    await eventually(lambda: engine.streams and engine.streams[0].produced > 0, "the utterance is being spoken")
    running.cancel()  # the first: the session starts ending its tasks, one of which ignores it
    await eventually(lambda: session.state is TtsState.CLOSING, "the session is ending its tasks")
    running.cancel()  # the second lands while it waits for them
    await asyncio.wait({running}, timeout=30)
    assert running.cancelled()
    assert engine.streams[0].cancelled
