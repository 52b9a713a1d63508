"""Wyoming synthesis as a transport over the shared TTS session: engine
failures, the session's idle and stall rules, its entry in the registry."""

from __future__ import annotations

from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.fronts.wyoming.harness import brief, connect, read, read_until, sessions_of, wyoming_server
from tests.support.waiting import eventually

START = ("audio-start", {"rate": 24000, "width": 2, "channels": 1})
STOP = ("audio-stop", {})
FAILURE = ("error", {"text": "fake engine failure", "code": "engine_error"})
LONG = " ".join(["This sentence has exactly forty-three chars."] * 60)  # two utterances


async def test_an_engine_failure_is_an_error_inside_the_audio_and_the_rest_is_not_spoken(tmp_path):
    engine = FakeTtsEngine(fail_after=2)
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=LONG).event())
        events = await read_until(client, "audio-stop")
    assert brief(events) == [START, FAILURE, STOP]
    assert [e.type for e in events].count("audio-chunk") == 2
    assert len(engine.streams) == 1  # the second utterance never started


async def test_a_failed_streaming_group_closes_its_audio_and_the_next_group_is_spoken(tmp_path):
    engine = FakeTtsEngine(fail_after=1)
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="One is first. ").event())
        first = await read_until(client, "audio-stop")
        await client.write_event(SynthesizeChunk(text="Two ends").event())
        await client.write_event(SynthesizeStop().event())
        rest = await read_until(client, "synthesize-stopped")
    assert brief(first) == [START, FAILURE, STOP]
    assert brief(rest) == [START, FAILURE, STOP, ("synthesize-stopped", {})]
    assert [s.text for s in engine.streams] == ["One is first.", "Two ends"]


async def test_the_registry_shows_the_sessions_live_counters(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"Endless.": 100_000})
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="Endless.").event())
        assert (await read(client)).type == "audio-start"
        (entry,) = sessions_of(server)
    assert {k: entry[k] for k in ("kind", "front", "engine", "voice", "state", "sample_rate")} == {
        "kind": "tts", "front": "wyoming", "engine": "pocket", "voice": "alba", "state": "open",
        "sample_rate": 24000}


async def test_a_streaming_request_that_gets_no_text_is_closed_after_the_idle_timeout(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}, idle_timeout_s=0.5) as server:
        async with connect(server) as client:
            await client.write_event(SynthesizeStart().event())
            assert await read(client) is None  # the server closed the connection
        await eventually(lambda: not sessions_of(server), "the session's end")
    assert engine.streams == []


async def test_a_client_that_reads_nothing_pauses_its_synthesis_then_is_closed(tmp_path):
    engine = FakeTtsEngine(frames_by_text={"Endless.": 100_000})
    async with wyoming_server(tmp_path, tts={"pocket": engine}, idle_timeout_s=0.5) as server:
        async with connect(server) as client:
            await client.write_event(Synthesize(text="Endless.").event())
            await eventually(lambda: bool(engine.streams) and engine.streams[0].closed, "the synthesis's end")
            await eventually(lambda: not sessions_of(server), "the session's end")
        (stream,) = engine.streams
    assert stream.cancelled
    assert stream.produced < stream.total  # generation waited for the reader, then stopped


async def test_past_64_waiting_requests_one_more_is_refused_and_the_connection_goes_on(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"Endless.": 100_000})
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="Endless.").event())
        assert (await read(client)).type == "audio-start"  # running: it waits no more
        for _ in range(65):
            await client.write_event(Synthesize(text="Queued.").event())
        while (event := await read(client)).type == "audio-chunk":
            pass
    assert (event.type, event.data) == ("error", {
        "text": "64 requests are already queued on this connection (the limit is 64); wait for their audio",
        "code": "too_many_utterances"})
