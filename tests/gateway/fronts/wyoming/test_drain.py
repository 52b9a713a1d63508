"""The drain before a stop on the Wyoming front, with the real ``wyoming``
client over fakes: a transcription under way gets its transcript for the
audio read so far, a synthesis under way finishes, events after the drain
began are answered ``draining``, then the connection closes (the client reads
the end of the stream); an idle connection closes at once, a new one is
refused. (SIGTERM on a real process: tests/e2e/test_drain.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart

from gateway.drain import Drainer
from gateway.fronts.wyoming.server import WyomingServer
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.fronts.wyoming.harness import (
    RATE,
    brief,
    connect,
    pcm,
    read,
    read_until,
    sessions_of,
    the_stream,
    wyoming_server,
)
from tests.support.fake_sidecar import FakeSidecar
from tests.support.waiting import eventually

DRAINING = "the server is draining before it stops; retry (another replica will answer)"


def not_taken(event_type: str) -> dict[str, str]:
    return {"text": f"{event_type} was not taken: the server is stopping; what was sent before it is finished, "
                    "send it again on a new connection", "code": "draining"}


class HoldingSidecar(FakeSidecar):
    """A fake sidecar that answers ``end`` only when the test delivers ``ended``."""

    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        self.frames.append((header, payload))


def start_drain(server: WyomingServer, drain_s: float = 30.0) -> asyncio.Task[bool]:
    return asyncio.create_task(Drainer(server.state["sessions"], drain_s).run())


async def test_a_transcription_under_way_gets_the_transcript_of_what_was_read_then_the_end(tmp_path):
    fake = HoldingSidecar()
    chunk = AudioChunk(rate=RATE, width=2, channels=1, audio=pcm(np.full(3200, 0.1, dtype=np.float32)))
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await client.write_event(chunk.event())
        stream = await the_stream(fake)
        await eventually(lambda: fake.ops(stream.id) == ["open", "audio"], "the audio reached the recognizer")
        fake.play({"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 1600},
                  {"ev": "partial", "utterance": 0, "text": "Turn on the", "stable": "Turn on", "start": 0.1,
                   "end": 0.9})
        assert [e.type for e in [await read(client), await read(client)]] == ["transcript-start", "transcript-chunk"]
        drained = start_drain(server)
        # the speaker is mid-utterance, yet no more audio is taken: what was read is finalized
        await eventually(lambda: "end" in fake.ops(stream.id), "the stream's end")
        await client.write_event(chunk.event())
        refusal = await read(client)
        fake.play({"ev": "final", "utterance": 0, "text": "Turn on the light.", "start": 0.1, "end": 0.2,
                   "language": "en"}, {"ev": "ended"})
        rest = await read_until(client, "transcript-stop")
        assert await read(client) is None  # the server closed the connection
        assert await drained is True
        ops = fake.ops(stream.id)
    assert (refusal.type, refusal.data) == ("error", not_taken("audio-chunk"))
    assert brief(rest) == [("transcript-chunk", {"text": " the light."}),
                           ("transcript", {"text": "Turn on the light.", "language": "en"}), ("transcript-stop", {})]
    assert ops == ["open", "audio", "end"]  # the chunk after the drain began never reached the recognizer


async def test_a_streaming_synthesis_under_way_speaks_its_text_and_stops_then_the_end(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="The first sentence is spoken. And the rest").event())
        assert (await read(client)).type == "audio-start"
        drained = start_drain(server)
        await eventually(lambda: server.state["sessions"].draining, "the drain")
        await client.write_event(SynthesizeChunk(text=" too late.").event())
        events = []
        while (event := await read(client)) is not None:
            events.append(event)
        assert await drained is True
    assert [e.data for e in events if e.type == "error"] == [not_taken("synthesize-chunk")]
    kinds = [e.type for e in events if e.type not in ("audio-chunk", "error")]
    assert kinds == ["audio-stop", "audio-start", "audio-stop", "synthesize-stopped"]
    assert [s.text for s in engine.streams] == ["The first sentence is spoken.", "And the rest"]
    assert all(s.produced == s.total for s in engine.streams)


async def test_an_idle_connection_closes_at_once(tmp_path):
    async with wyoming_server(tmp_path) as server, connect(server) as client:
        await client.write_event(Ping(text="hi").event())
        assert (await read(client)).type == "pong"
        drained = start_drain(server)
        assert await read(client) is None
        assert await drained is True


async def test_at_the_deadline_synthesis_stops_at_the_next_frame_and_the_audio_is_closed(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"Endless.": 100_000})
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="Endless.").event())
        await client.write_event(Synthesize(text="Queued behind it.").event())
        assert (await read(client)).type == "audio-start"
        drained = start_drain(server, drain_s=0)
        events = []
        while (event := await read(client)) is not None:
            events.append(event)
        assert await drained is False
    assert [e.type for e in events if e.type != "audio-chunk"] == ["audio-stop"]
    (stream,) = engine.streams  # what was queued behind it never started
    assert stream.cancelled and stream.produced < stream.total
    assert sessions_of(server) == []


async def test_a_new_connection_while_draining_gets_a_draining_error_and_the_end(tmp_path):
    async with wyoming_server(tmp_path) as server:
        assert await start_drain(server) is True
        async with connect(server) as client:
            refusal = await read(client)
            assert await read(client) is None
    assert (refusal.type, refusal.data) == ("error", {"text": DRAINING, "code": "draining"})
