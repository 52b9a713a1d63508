"""Wyoming synthesis over a fake engine, with the real ``wyoming`` client."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from engines.base import EngineState
from gateway.fronts.wyoming.link import pcm16
from tests.gateway.fakes import FakeTtsEngine, expected_audio, frames_for
from tests.gateway.fronts.wyoming.harness import brief, connect, read, read_until, sessions_of, wyoming_server

START = ("audio-start", {"rate": 24000, "width": 2, "channels": 1})
STOP = ("audio-stop", {})
TEXT = "Hello there, this is a test."


def audio_of(events) -> bytes:
    return b"".join(e.payload for e in events if e.type == "audio-chunk")


async def test_synthesize_sends_one_chunk_per_engine_frame(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=TEXT).event())
        events = await read_until(client, "audio-stop")
    assert brief(events) == [START, STOP]
    chunks = [e for e in events if e.type == "audio-chunk"]
    assert len(chunks) == frames_for(TEXT)
    assert all(c.data == {"rate": 24000, "width": 2, "channels": 1} for c in chunks)
    assert audio_of(events) == pcm16(expected_audio(TEXT))
    assert [s.voice for s in engine.streams] == ["alba"]


async def test_a_named_voice_and_a_speaker_reach_the_engine(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="marius", speaker="2")).event())
        await read_until(client, "audio-stop")
    assert [(s.voice, s.options.extra) for s in engine.streams] == [("marius", {"speaker": "2"})]


async def test_streaming_speaks_the_first_sentence_alone_and_ends_with_synthesize_stopped(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeChunk(text="Hello there. ").event())
        first = await read_until(client, "audio-stop")  # spoken before the stream ends
        for piece in ("How are ", "you? ", "Fine, thanks"):
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(Synthesize(text="Hello there. How are you? Fine, thanks").event())
        await client.write_event(SynthesizeStop().event())
        rest = await read_until(client, "synthesize-stopped")
    assert brief(first) == [START, STOP]
    assert audio_of(first) == pcm16(expected_audio("Hello there."))
    texts = [s.text for s in engine.streams]
    assert texts[0] == "Hello there."
    assert " ".join(texts[1:]) == "How are you? Fine, thanks"  # the compatibility synthesize adds nothing
    assert brief(rest) == [START, STOP] * (len(texts) - 1) + [("synthesize-stopped", {})]
    assert audio_of(rest) == b"".join(pcm16(expected_audio(t)) for t in texts[1:])


async def test_sentences_that_wait_are_spoken_as_one_utterance(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(SynthesizeStart().event())
        for piece in ("One is first. ", "Two comes next. ", "Three follows. ", "Four ends"):
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(SynthesizeStop().event())
        events = await read_until(client, "synthesize-stopped")
    assert [s.text for s in engine.streams] == ["One is first.", "Two comes next. Three follows. Four ends"]
    assert brief(events) == [START, STOP, START, STOP, ("synthesize-stopped", {})]


async def test_errors_are_events_and_the_connection_goes_on(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="nobody")).event())
        assert (await read(client)).data == {"text": "unknown voice 'nobody'; available voices: alba, marius",
                                             "code": "unknown_voice"}
        for event_type, data, answer in [
            ("synthesize", {}, 'synthesize: "text" must be a string'),
            ("synthesize", {"text": "   "}, 'synthesize: "text" is empty'),
            ("synthesize", {"text": "hi", "voice": "alba"}, 'synthesize: "voice" must be an object'),
            ("synthesize-chunk", {"text": "hi"},
             "synthesize-chunk: no streaming request is open; send synthesize-start first"),
            ("synthesize-stop", {}, "synthesize-stop: no streaming request is open; send synthesize-start first"),
            ("select-program", {"name": "espeak"},
             "select-program: no program 'espeak'; programs: voxgate-asr, voxgate-pocket"),
        ]:
            from wyoming.event import Event

            await client.write_event(Event(event_type, data))
            event = await read(client)
            assert (event.type, event.data) == ("error", {"text": answer, "code": "bad_message"})
        await client.write_event(SynthesizeStart().event())
        await client.write_event(SynthesizeStart().event())
        event = await read(client)
        assert event.data["text"] == ("synthesize-start: a streaming request is already open; "
                                      "send synthesize-stop first")
        await client.write_event(Ping(text="still here").event())
        assert (await read(client)).data == {"text": "still here"}
    assert engine.streams == []


async def test_an_engine_that_is_not_ready_is_an_error_naming_its_state(tmp_path):
    engine = FakeTtsEngine(state=EngineState.MISSING, detail=f"Pocket TTS weights not found: {tmp_path}/model",
                           hint="run `voxgate models pull pocket`")
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=TEXT).event())
        event = await read(client)
    assert (event.type, event.data) == ("error", {
        "text": "Pocket TTS is not available on this gateway (not installed); an admin can see why at GET /v1/engines",
        "code": "engine_unavailable"})
    assert str(tmp_path) not in repr(event.data)


async def test_a_text_too_long_is_refused(tmp_path):
    async with wyoming_server(tmp_path, tts={"pocket": FakeTtsEngine()}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="a" * 40001).event())
        event = await read(client)
    assert event.data == {"text": "text: 40001 characters; the limit is 40000", "code": "text_too_long"}


async def test_a_long_text_is_spoken_in_pieces_within_one_audio_stream(tmp_path):
    engine = FakeTtsEngine()
    text = " ".join(["This sentence has exactly forty-three chars."] * 60)  # about 2700 characters
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text=text).event())
        events = await read_until(client, "audio-stop")
    assert brief(events) == [START, STOP]
    assert len(engine.streams) == 2 and all(len(s.text) <= 2000 for s in engine.streams)
    assert " ".join(s.text for s in engine.streams) == text


async def test_synthesis_counts_against_the_tts_session_limit(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}, max_tts_sessions=1) as server:
        server.state["sessions"].add("tts", "elsewhere", dict)
        async with connect(server) as client:
            await client.write_event(Synthesize(text=TEXT).event())
            event = await read(client)
        assert event.data == {"text": "too many TTS sessions (limit 1); try again later", "code": "over_capacity"}


async def test_synthesis_counts_against_the_client_addresss_share(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}, max_tts_sessions_per_client=1) as server:
        server.state["sessions"].claim("tts", "127.0.0.1:5000", dict, share="127.0.0.1")  # a socket of this machine
        async with connect(server) as client:
            await client.write_event(Synthesize(text=TEXT).event())
            event = await read(client)
        assert event.data == {"text": "too many TTS sessions from one client (limit 1 per client); end one of "
                                      "yours or try again later", "code": "over_capacity"}


async def test_leaving_cancels_the_synthesis_at_the_next_frame(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    text = "A long text. " * 40
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server:
        async with connect(server) as client:
            await client.write_event(Synthesize(text=text).event())
            assert (await read(client)).type == "audio-start"
            assert (await read(client)).type == "audio-chunk"
            assert sessions_of(server)[0]["kind"] == "tts"
        for _ in range(200):
            if engine.streams[0].closed and not sessions_of(server):
                break
            await asyncio.sleep(0.01)
        (stream,) = engine.streams
        assert stream.cancelled and stream.closed
        assert stream.produced < stream.total
        assert sessions_of(server) == []


async def test_a_client_that_selects_a_program_gets_that_engine(tmp_path):
    pocket, piper = FakeTtsEngine(), FakeTtsEngine(engine_id="piper", builtin=("joe",))
    from wyoming.info import SelectProgram

    async with wyoming_server(tmp_path, tts={"pocket": pocket, "piper": piper}) as server, connect(server) as client:
        await client.write_event(SelectProgram(name="voxgate-piper").event())
        await client.write_event(Synthesize(text=TEXT).event())
        await read_until(client, "audio-stop")
        await client.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="marius")).event())
        await read_until(client, "audio-stop")  # a voice name finds its engine
    assert [s.voice for s in piper.streams] == ["joe"]
    assert [s.voice for s in pocket.streams] == ["marius"]


def test_pcm16_clips_and_rounds():
    assert pcm16(np.array([0.0, 1.5, -1.5, 0.5], dtype=np.float32)) == \
        np.array([0, 32767, -32767, 16384], dtype="<i2").tobytes()


@pytest.mark.slow
async def test_leaving_stops_the_real_piper_stream_between_sentences(tmp_path):
    from engines.piper.engine import PiperEngine

    engine = PiperEngine(threads=2)
    await engine.load()
    opened = []
    open_stream = engine.open_stream

    def spy(*args, **kwargs):
        opened.append(open_stream(*args, **kwargs))
        return opened[-1]

    engine.open_stream = spy  # type: ignore[method-assign]
    text = " ".join(f"This is sentence number {n} of a long answer." for n in range(1, 30))
    try:
        async with wyoming_server(tmp_path, tts={"piper": engine}, tts_engine="piper") as server:
            async with connect(server) as client:
                await client.write_event(Synthesize(text=text).event())
                assert (await read(client)).data == {"rate": 22050, "width": 2, "channels": 1}
                assert len((await read(client)).payload) == 1764 * 2  # one 80 ms frame
            for _ in range(300):
                if engine.open_streams == 0:
                    break
                await asyncio.sleep(0.01)
            (stream,) = opened
            assert engine.open_streams == 0 and stream.is_cancelled()
            assert stream.sentences == 29 and stream.synthesized < 29
    finally:
        await engine.close()
