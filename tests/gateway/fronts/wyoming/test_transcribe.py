"""Wyoming transcription over a fake ASR sidecar, with the real ``wyoming`` client."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.ping import Ping

from engines.base import EngineState
from gateway.fronts.wyoming.link import PcmIn
from gateway.fronts.wyoming.messages import AudioFormat
from tests.gateway.fronts.wyoming.harness import (
    RATE,
    connect,
    pcm,
    read,
    read_until,
    sessions_of,
    the_stream,
    wyoming_server,
)
from tests.support.fake_sidecar import FakeSidecar

SPEECH = [
    {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 1600},
    {"ev": "partial", "utterance": 0, "text": "Turn", "stable": "", "start": 0.1, "end": 0.5},
    {"ev": "partial", "utterance": 0, "text": "Turn on the", "stable": "Turn on", "start": 0.1, "end": 0.9},
    {"ev": "partial", "utterance": 0, "text": "Turn on the light", "stable": "Turn on the", "start": 0.1, "end": 1.2},
    {"ev": "final", "utterance": 0, "text": "Turn on the light.", "start": 0.1, "end": 1.3, "language": "en",
     "end_sample": 20800},
]


async def test_streaming_transcript_events_come_in_order_and_add_up(tmp_path):
    fake = FakeSidecar()
    audio = (np.arange(3200) % 200 / 400 - 0.25).astype(np.float32)
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=pcm(audio)).event())
        stream = await the_stream(fake)
        fake.play(*SPEECH[:4])
        streamed = [await read(client) for _ in range(3)]
        assert sessions_of(server)[0]["kind"] == "dictation"
        fake.play(SPEECH[4])
        await client.write_event(AudioStop().event())
        rest = await read_until(client, "transcript-stop")
        ops = fake.ops(stream.id)
        sent = fake.audio_sent(stream.id)
    events = [(e.type, e.data) for e in streamed + rest]
    assert events == [
        ("transcript-start", {"language": "en"}),
        ("transcript-chunk", {"text": "Turn on"}),
        ("transcript-chunk", {"text": " the"}),
        ("transcript-chunk", {"text": " light."}),  # the final's rest: the chunks add up to the final text
        ("transcript", {"text": "Turn on the light.", "language": "en"}),
        ("transcript-stop", {}),
    ]
    assert ops == ["open", "audio", "end"]  # after "ended" the sidecar has dropped the stream itself
    assert np.array_equal(sent, np.frombuffer(pcm(audio), dtype="<i2") / np.float32(32768))
    assert sessions_of(server) == []


PLAIN_FINALS = [
    {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0},
    {"ev": "final", "utterance": 0, "text": "One.", "start": 0.1, "end": 0.5, "language": "en"},
    {"ev": "speech_started", "utterance": 1, "at": 1.0, "start_sample": 16000},
    {"ev": "final", "utterance": 1, "text": "Two.", "start": 1.0, "end": 1.5, "language": "en"},
]
SPACED_FINALS = [
    {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0},
    {"ev": "final", "utterance": 0, "text": " One. ", "start": 0.1, "end": 0.5, "language": "en"},
    {"ev": "speech_started", "utterance": 1, "at": 1.0, "start_sample": 16000},
    {"ev": "partial", "utterance": 1, "text": " Two", "stable": " Two", "start": 1.0, "end": 1.2},
    {"ev": "final", "utterance": 1, "text": " Two. ", "start": 1.0, "end": 1.5, "language": "en"},
]


@pytest.mark.parametrize(("recognized", "chunks"), [
    (PLAIN_FINALS, ["One.", " Two."]),  # the second utterance's chunk keeps a space
    (SPACED_FINALS, ["One.", " Two", "."]),  # whitespace around the finals never doubles
], ids=["two-utterances", "spaced-finals"])
async def test_two_utterances_are_joined_in_chunks_that_add_up_to_the_transcript(tmp_path, recognized, chunks):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await the_stream(fake)
        fake.play(*recognized)
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript-stop")
    assert [(e.type, e.data) for e in events] == [
        ("transcript-start", {}), *[("transcript-chunk", {"text": chunk}) for chunk in chunks],
        ("transcript", {"text": "One. Two.", "language": "en"}), ("transcript-stop", {})]


async def test_vad_endpointing_answers_before_audio_stop(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(Transcribe(language="en", vad_sensitivity="aggressive").event())
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await the_stream(fake)
        fake.play(*SPEECH)
        events = await read_until(client, "transcript-stop")  # no audio-stop sent yet
        await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=bytes(3200)).event())
        await client.write_event(AudioStop().event())
        await client.write_event(Ping(text="after").event())
        after = await read(client)
        open_header = fake.frames[0][0]
    assert events[-2].data == {"text": "Turn on the light.", "language": "en"}
    assert (after.type, after.data) == ("pong", {"text": "after"})  # nothing more for that audio-stop
    assert open_header["silence_ms"] == 400
    assert open_header["language"] == "en"


async def test_audio_stop_without_audio_gives_an_empty_transcript(tmp_path):
    async with wyoming_server(tmp_path, asr=FakeSidecar()) as server, connect(server) as client:
        await client.write_event(Transcribe().event())
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript-stop")
    assert [(e.type, e.data) for e in events] == [("transcript-start", {}), ("transcript", {"text": ""}),
                                                  ("transcript-stop", {})]


async def test_audio_without_audio_start_opens_a_stream(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=bytes(640)).event())
        stream = await the_stream(fake)
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript-stop")
    assert fake.audio_sent(stream.id).tolist() == [0.0] * 320
    assert events[-2].data == {"text": ""}


async def test_refusals_are_error_events_and_the_audio_is_dropped(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake, max_dictation_streams=1) as server:
        server.state["sessions"].add("dictation", "elsewhere", dict)
        async with connect(server) as client:
            await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            event = await read(client)
            await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=bytes(640)).event())
            await client.write_event(AudioStop().event())
            await client.write_event(Ping().event())
            after = await read(client)
    assert (event.type, event.data) == ("error", {"text": "too many dictation streams (limit 1); try again later",
                                                  "code": "over_capacity"})
    assert after.type == "pong"
    assert fake.frames == []


@pytest.mark.parametrize(("data", "text"), [
    ({"rate": 16000, "width": 3, "channels": 1}, "audio-start: width 3 is not 1, 2 or 4 bytes"),
    ({"rate": 4000, "width": 2, "channels": 1}, "audio-start: rate 4000 is out of range (8000..48000)"),
    ({"rate": "16000", "width": 2, "channels": 1}, 'audio-start: "rate" must be an integer'),
    ({"rate": 16000, "width": 2}, 'audio-start: "channels" must be an integer'),
])
async def test_a_bad_audio_format_is_named(tmp_path, data, text):
    async with wyoming_server(tmp_path, asr=FakeSidecar()) as server, connect(server) as client:
        await client.write_event(Event("audio-start", data))
        event = await read(client)
    assert (event.type, event.data) == ("error", {"text": text, "code": "bad_message"})


async def test_asr_that_is_not_ready_is_an_error_naming_its_state(tmp_path):
    fake = FakeSidecar(state=EngineState.MISSING, detail=f"model tiny.en not found in {tmp_path}",
                       hint="pip install it")
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        event = await read(client)
    assert (event.type, event.data) == ("error", {
        "text": "Speech recognition is not available on this gateway (not installed); an admin can see why at "
                "GET /v1/engines", "code": "engine_unavailable"})
    assert str(tmp_path) not in repr(event.data)


async def test_an_unsupported_language_is_refused(tmp_path):
    async with wyoming_server(tmp_path, asr=FakeSidecar()) as server, connect(server) as client:
        await client.write_event(Transcribe(language="de-DE").event())
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        event = await read(client)
    assert event.data == {"text": "language: the ASR model tiny.en does not support 'de' (available: en); an admin "
                                  "can install multilingual Whisper base",
                          "code": "unsupported_language"}


async def test_leaving_mid_audio_closes_the_stream(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server:
        async with connect(server) as client:
            await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            stream = await the_stream(fake)
        for _ in range(200):
            if not sessions_of(server) and not fake.streams:
                break
            await asyncio.sleep(0.01)
        assert sessions_of(server) == []
        assert fake.ops(stream.id) == ["open", "close"]


def test_pcm_in_mixes_channels_widens_and_resamples():
    pcm_in = PcmIn(16000)
    stereo8 = bytes([128, 192, 64, 128])  # two frames: (0, 0.5), (-0.5, 0)
    assert pcm_in.feed(AudioFormat(16000, 1, 2), stereo8).tolist() == [0.25, -0.25]
    wide = np.array([2 ** 30, -(2 ** 30)], dtype="<i4").tobytes()
    assert pcm_in.feed(AudioFormat(16000, 4, 1), wide[:5]).tolist() == [0.5]  # the split sample waits
    assert pcm_in.feed(AudioFormat(16000, 4, 1), wide[5:]).tolist() == [-0.5]
    out = pcm_in.feed(AudioFormat(48000, 2, 1), bytes(2 * 4800))  # a new rate: a new resampler
    total = len(out) + len(pcm_in.flush())
    assert total == 1600


async def test_a_transcription_whose_audio_stops_coming_is_closed_when_idle(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake, idle_timeout_s=1) as server:
        async with connect(server) as client:
            await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            stream = await the_stream(fake)
            assert await read(client) is None  # closed after 1 s without events
        for _ in range(200):
            if not sessions_of(server):
                break
            await asyncio.sleep(0.01)
        assert sessions_of(server) == []
        assert fake.ops(stream.id) == ["open", "close"]


async def test_one_client_address_holds_its_share_of_dictation_streams(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake, max_dictation_streams=8) as server:  # 2 per client
        server.state["sessions"].claim("dictation", "elsewhere", dict, share="198.51.100.2")  # another client's
        async with connect(server) as first, connect(server) as second, connect(server) as third:
            for client in (first, second):
                await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            await until_streams(server, 3)
            await third.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            event = await read(third)
            assert (event.type, event.data) == ("error", {
                "text": "too many dictation streams from one client (limit 2 per client); end one of yours or try "
                        "again later", "code": "over_capacity"})
            await first.write_event(AudioStop().event())
            await read_until(first, "transcript-stop")
            await until_streams(server, 2)
            await third.write_event(AudioStart(rate=RATE, width=2, channels=1).event())  # room again
            await until_streams(server, 3)
        await until_streams(server, 1)  # the connections are gone, and their streams with them


async def until_streams(server, count: int) -> None:
    for _ in range(500):
        if len(sessions_of(server)) == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never {count} streams: {sessions_of(server)}")


async def test_chunks_follow_the_partials_and_a_revised_word_stays_as_sent(tmp_path):
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await the_stream(fake)

        def partial(text: str) -> None:
            fake.play({"ev": "partial", "utterance": 0, "text": text, "stable": "", "start": 0.1, "end": 0.5})

        fake.play({"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 1600})
        assert (await read(client)).type == "transcript-start"
        partial("Turn")
        partial("Turn on")  # "Turn" is in one partial but the newest word: not yet
        partial("Turn on the")
        first = await read(client)  # two partials in a row hold "Turn", with more heard after it
        partial("Turn on the light")
        second = await read(client)
        partial("Turn off the light now")  # "on" was sent: the revision adds nothing
        fake.play({"ev": "final", "utterance": 0, "text": "Turn off the light now.", "start": 0.1, "end": 1.3,
                   "language": "en"})
        await client.write_event(AudioStop().event())
        rest = await read_until(client, "transcript-stop")
    assert [(e.type, e.data) for e in (first, second, *rest)] == [
        ("transcript-chunk", {"text": "Turn"}), ("transcript-chunk", {"text": " on"}),
        ("transcript-chunk", {"text": " the light now."}),  # the final's words past the two sent
        ("transcript", {"text": "Turn off the light now.", "language": "en"}), ("transcript-stop", {})]


async def test_the_transcript_is_the_utterance_decode_where_committed_words_overrode_it(tmp_path):
    """The partials committed "a word"; the final's own decode on the whole window heard "a rare":
    the chunks keep what they promised, the transcript (the answer) is the decode."""
    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await the_stream(fake)
        fake.play({"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 1600},
                  {"ev": "partial", "utterance": 0, "text": "These days a word", "stable": "These days a word",
                   "start": 0.1, "end": 1.0},
                  {"ev": "final", "utterance": 0, "text": "These days a word dish.", "start": 0.1, "end": 1.6,
                   "language": "en", "decoded": "These days a rare dish."})
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript-stop")
    assert [(e.type, e.data) for e in events] == [
        ("transcript-start", {}), ("transcript-chunk", {"text": "These days a word"}),
        ("transcript-chunk", {"text": " dish."}),
        ("transcript", {"text": "These days a rare dish.", "language": "en"}), ("transcript-stop", {})]
