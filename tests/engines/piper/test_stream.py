"""PiperStream with a fake synthesizer: framing, prefetch, cancel, errors, resampling."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from engines.base import EngineError
from engines.piper.pool import DeadlinePool
from engines.piper.stream import PiperStream, cut_frames
from tests.engines.piper.fakes import FakeSynth, expected_sentence

RATE = 22050
FRAME = 1764  # 80 ms at 22050 Hz
TEXT = "The first one is here. A second sentence follows it. Third and last"


@pytest.fixture
def pool():
    pool = DeadlinePool(threads=2)
    yield pool
    pool.close()


def open_stream(pool: DeadlinePool, synth: FakeSynth, text: str = TEXT, **kw) -> PiperStream:
    closed = []
    stream = PiperStream(pool, lambda: synth, text, out_rate=kw.pop("out_rate", RATE), frame_samples=FRAME,
                         on_close=lambda: closed.append(True), **kw)
    stream.closed_log = closed  # type: ignore[attr-defined]
    return stream


def test_cut_frames_gives_whole_frames_then_the_rest():
    audio = np.arange(2 * FRAME + 5, dtype=np.float32)
    frames = list(cut_frames(audio, FRAME))
    assert [len(f) for f in frames] == [FRAME, FRAME, 5]
    assert np.array_equal(np.concatenate(frames), audio)


async def test_frames_are_80_ms_per_sentence_and_concatenate_to_the_sentences(pool):
    synth = FakeSynth()
    stream = open_stream(pool, synth)
    frames = [f async for f in stream.frames()]
    expected = [expected_sentence(TEXT, i) for i in range(3)]
    sizes = [len(f) for f in frames]
    for sentence in expected:  # each sentence: whole frames, then its own shorter tail
        n, rest = divmod(len(sentence), FRAME)
        assert sizes[:n + (rest > 0)] == [FRAME] * n + ([rest] if rest else [])
        sizes = sizes[n + (rest > 0):]
    assert sizes == []
    assert np.array_equal(np.concatenate(frames), np.concatenate(expected))
    assert synth.calls == [0, 1, 2]
    assert (stream.sentences, stream.synthesized) == (3, 3)
    assert stream.closed_log == [True]


async def test_the_next_sentence_is_made_while_the_current_one_is_read(pool):
    synth = FakeSynth()
    second = synth.gate(1)
    stream = open_stream(pool, synth)
    frames = stream.frames()
    first = await frames.__anext__()  # sentence 0 is ready and its first frame is out
    assert first[0] == 1
    assert await asyncio.to_thread(synth.started[1].wait, 5)  # sentence 1 started before 0 was read
    second.set()
    rest = [f async for f in frames]
    assert synth.calls == [0, 1, 2]
    assert {float(f[0]) for f in rest} == {1.0, 2.0, 3.0}


async def test_only_one_sentence_is_made_ahead(pool):
    synth = FakeSynth()
    stream = open_stream(pool, synth, "One. Two. Three. Four")
    frames = stream.frames()
    await frames.__anext__()
    for _ in range(100):
        if len(synth.calls) >= 2 and synth.running == 0:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert synth.calls == [0, 1]  # sentence 2 waits until sentence 1 is handed out
    await frames.aclose()


async def test_cancel_stops_at_the_next_frame_and_no_later_sentence_runs(pool):
    synth = FakeSynth(samples_per_id=FRAME)  # many frames per sentence
    second = synth.gate(1)
    stream = open_stream(pool, synth)
    got = []
    async for frame in stream.frames():
        got.append(frame)
        if len(got) == 2:
            stream.cancel()
    assert len(got) == 2
    second.set()
    await asyncio.sleep(0.05)
    assert synth.calls in ([0], [0, 1])  # sentence 1 may have been running; sentence 2 never starts
    assert 2 not in synth.calls
    assert stream.closed_log == [True]


async def test_cancel_wakes_a_reader_waiting_for_the_next_sentence(pool):
    synth = FakeSynth()
    second = synth.gate(1)
    stream = open_stream(pool, synth)
    frames = stream.frames()
    first_sentence = []
    async for frame in frames:
        first_sentence.append(frame)
        if sum(len(f) for f in first_sentence) == len(expected_sentence(TEXT, 0)):
            break
    waiting = asyncio.ensure_future(frames.__anext__())  # waits for sentence 1, which is held
    await asyncio.sleep(0.05)
    assert not waiting.done()
    stream.cancel()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 2)
    second.set()
    assert stream.closed_log == [True]


async def test_a_stream_cancelled_before_reading_makes_nothing(pool):
    synth = FakeSynth()
    stream = open_stream(pool, synth)
    stream.cancel()
    assert [f async for f in stream.frames()] == []
    assert synth.calls == []
    assert stream.closed_log == [True]


async def test_a_model_failure_is_an_engine_error(pool):
    synth = FakeSynth(fail_on=1)
    stream = open_stream(pool, synth)
    got = []
    with pytest.raises(EngineError, match=r"^Piper failed on this text: RuntimeError: the fake model failed$") as info:
        async for frame in stream.frames():
            got.append(frame)
    assert info.value.code == "engine_error"
    assert np.array_equal(np.concatenate(got), expected_sentence(TEXT, 0))


async def test_a_stuck_sentence_times_out(pool):
    synth = FakeSynth()
    held = synth.gate(0)
    stream = open_stream(pool, synth, job_timeout_s=0.2)
    with pytest.raises(EngineError, match=r"^Piper produced no audio for 0.2 s$") as info:
        _ = [f async for f in stream.frames()]
    assert info.value.code == "engine_timeout"
    held.set()


async def test_a_voice_at_another_rate_is_resampled_to_the_engine_rate(pool):
    synth = FakeSynth(sample_rate=16000)
    stream = open_stream(pool, synth, "Just one sentence here")
    audio = np.concatenate([f async for f in stream.frames()])
    source = len(expected_sentence("Just one sentence here", 0))
    assert len(audio) == pytest.approx(source * RATE / 16000, abs=2)


async def test_the_speaker_name_becomes_its_id(pool):
    synth = FakeSynth()
    stream = open_stream(pool, synth, "Hello", speaker="bob")
    _ = [f async for f in stream.frames()]
    assert synth.speaker_ids == [1]


async def test_an_empty_phonemization_gives_no_frames(pool):
    synth = FakeSynth()
    stream = open_stream(pool, synth, ". ")
    assert [f async for f in stream.frames()] == []
    assert stream.sentences == 0


async def test_every_sentence_alone_on_the_pool_may_use_every_core_prefetched_ones_too(pool):
    synth = FakeSynth()
    _ = [f async for f in open_stream(pool, synth).frames()]
    assert synth.wide == [True, True, True]


async def test_an_inference_beside_another_runs_on_one_core(pool):
    synth = FakeSynth()
    held = synth.gate(0)
    busy = open_stream(pool, synth, "Held here")
    busy_frames = asyncio.ensure_future(_drain(busy))
    assert await asyncio.to_thread(synth.started[0].wait, 5)
    other = FakeSynth()
    _ = [f async for f in open_stream(pool, other, "Runs beside").frames()]
    held.set()
    await busy_frames
    assert other.wide == [False]


async def _drain(stream: PiperStream) -> list:
    return [f async for f in stream.frames()]
