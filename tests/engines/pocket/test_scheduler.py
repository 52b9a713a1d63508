"""The batch scheduler: joined streams sound as if alone; a paused stream blocks nobody."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engines.base import EngineError, EngineUnavailable
from engines.pocket import load_model, synthesize
from engines.pocket.scheduler import BatchScheduler, ScheduledStream
from tests.support.waiting import eventually

TEXTS = {
    1: ("alba", "Hello world, how are you today?"),
    2: ("marius", "A second voice joins a little later."),
    3: ("alba", "And a third one, with more words to say than the others, joins last."),
}
# Rows of different batch sizes go through different matmul kernels; the result
# agrees with the single-stream run to float32 rounding, not bit for bit.
ATOL = 1e-4


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path):
    return load_model(tiny_model_dir)


@pytest.fixture(scope="module")
def alone(model) -> dict[int, np.ndarray]:
    """Each utterance synthesised on its own, with its seed."""
    return {seed: synthesize(model, text, model.load_voice(voice), seed=seed) for seed, (voice, text) in TEXTS.items()}


@pytest.fixture(params=[(False, 1), (True, 1), (False, 4), (True, 4)],
                ids=["sequential", "pipelined", "chunked", "chunked-pipelined"])
async def scheduler(model, request):
    # Pipelined: Mimi decodes on the batch's helper thread while the LM runs (2 threads, 1 core each).
    # Chunked: after its first frame a stream's latents are decoded 4 at a time (lead_s=0: always).
    pipelined, decode_chunk = request.param
    sched = BatchScheduler(model, max_streams=4, max_waiting=2, threads=2 if pipelined else 1,
                           pipelined=pipelined, decode_chunk=decode_chunk, lead_s=0.0)
    assert sched.pipelined is pipelined
    sched.start()
    yield sched
    await asyncio.to_thread(sched.close)


def _submit(sched: BatchScheduler, model, seed: int) -> ScheduledStream:
    voice, text = TEXTS[seed]
    return sched.submit(text, model.load_voice(voice), seed=seed)


_readers: weakref.WeakKeyDictionary[ScheduledStream, AsyncIterator] = weakref.WeakKeyDictionary()


async def _take(stream: ScheduledStream, n: int | None = None) -> list[np.ndarray]:
    """The next ``n`` frames (all remaining if None), through one iterator per stream."""
    frames = _readers.setdefault(stream, stream.frames())
    out = []
    while n is None or len(out) < n:
        try:
            out.append(await frames.__anext__())
        except StopAsyncIteration:
            break
    return out


def _assert_same_audio(frames: list[np.ndarray], expected: np.ndarray) -> None:
    assert all(f.shape == (1920,) and f.dtype == np.float32 for f in frames)
    got = np.concatenate(frames)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


async def test_streams_joining_at_different_times_sound_as_if_alone(scheduler, model, alone):
    first = _submit(scheduler, model, 1)
    head1 = await _take(first, 5)
    second = _submit(scheduler, model, 2)
    head2 = await _take(second, 3)
    head1 += await _take(first, 4)
    third = _submit(scheduler, model, 3)
    rest = await asyncio.gather(_take(first), _take(second), _take(third))
    _assert_same_audio(head1 + rest[0], alone[1])
    _assert_same_audio(head2 + rest[1], alone[2])
    _assert_same_audio(rest[2], alone[3])
    assert scheduler.rows_stepped > scheduler.steps  # some steps really carried several streams


async def test_a_paused_stream_does_not_block_the_others(scheduler, model, alone):
    # Both unread at first: each is paused once high_water frames wait for its reader. The busy
    # one is far longer than what a paused stream can have made (its queue bound), so it is
    # still unfinished when the stalled one is paused, and only its reader lets it go on.
    assert len(alone[3]) // 1920 > scheduler.high_water and len(alone[1]) // 1920 > 3 * scheduler.high_water
    stalled = _submit(scheduler, model, 3)  # nobody reads it for now
    busy = _submit(scheduler, model, 1)
    await eventually(lambda: stalled.paused, "the unread stream paused")
    assert not busy.finished
    busy_frames = await _take(busy)  # runs to the end while the other sits paused
    _assert_same_audio(busy_frames, alone[1])
    assert stalled.paused  # nobody read it, so it is paused still
    # decoded chunks can land on top of the high-water mark (pipelined: up to four helper
    # jobs in one step), never past the stream's queue bound
    assert scheduler.high_water <= stalled.buffered < scheduler.high_water + 4 * scheduler.decode_chunk
    # Pausing (rows swapped out of the step and back) leaves its audio unchanged.
    _assert_same_audio(await _take(stalled), alone[3])


async def test_cancel_ends_the_stream_and_frees_its_row(scheduler, model):
    stream = _submit(scheduler, model, 3)
    assert len(await _take(stream, 2)) == 2
    stream.cancel()
    assert await _take(stream) == []
    await eventually(lambda: scheduler.load() == (0, 0), "the cancelled stream's row freed")


def test_a_stream_short_of_audio_is_decoded_every_step(model):
    sched = BatchScheduler(model, threads=1, decode_chunk=4)
    assert sched.lead_s == pytest.approx(4 * 0.08)  # default: one chunk of audio ahead
    now = time.monotonic()
    sched._active = {
        1: SimpleNamespace(delivered=10, first_frame_at=now - 0.1),  # 0.7 s ahead: chunked
        2: SimpleNamespace(delivered=5, first_frame_at=now - 0.3),  # 0.1 s ahead: hurried
        3: SimpleNamespace(delivered=0, first_frame_at=None),  # no frame yet: the batch decodes it at once
        4: SimpleNamespace(delivered=1, first_frame_at=now - 1.0),  # behind, but paused
    }
    assert sched._hurried({4}) == {2}
    sched.decode_chunk = 1
    assert sched._hurried(set()) == set()
    with pytest.raises(ValueError, match="^decode_chunk: must be at least 1$"):
        BatchScheduler(model, threads=1, decode_chunk=0)


async def test_admission_is_bounded(model):
    sched = BatchScheduler(model, max_streams=1, max_waiting=1, threads=1)
    sched.start()
    try:
        running = _submit(sched, model, 1)
        await _take(running, 1)  # admitted into the batch
        waiting = _submit(sched, model, 2)
        with pytest.raises(EngineError, match=r"too many TTS streams: 1 running and 1 waiting") as info:
            _submit(sched, model, 3)
        assert info.value.code == "over_capacity"
        running.cancel()
        assert len(await _take(waiting)) > 0  # admitted once the row was free
    finally:
        await asyncio.to_thread(sched.close)


async def test_empty_text_fails_only_that_stream(scheduler, model, alone):
    bad = scheduler.submit("   ", model.load_voice("alba"), seed=1)
    good = _submit(scheduler, model, 1)
    with pytest.raises(EngineError, match="text: must contain at least one non-space character") as info:
        await _take(bad)
    assert info.value.code == "bad_request"
    _assert_same_audio(await _take(good), alone[1])


async def test_close_ends_open_streams_with_unavailable(model):
    sched = BatchScheduler(model, max_streams=2, threads=1)
    sched.start()
    stream = _submit(sched, model, 3)
    await _take(stream, 1)
    await asyncio.to_thread(sched.close)
    with pytest.raises(EngineUnavailable, match="the Pocket TTS engine was closed"):
        await _take(stream)
    with pytest.raises(EngineUnavailable, match="worker is not running"):
        _submit(sched, model, 1)


async def test_a_stalled_consumer_is_dropped_after_the_stall_timeout(model):
    sched = BatchScheduler(model, max_streams=2, threads=1, high_water=2, low_water=1, stall_timeout_s=0.2)
    sched.start()
    try:
        stream = _submit(sched, model, 3)
        await eventually(lambda: stream.finished, "the stalled stream dropped")
        assert sched.load() == (0, 0)
        assert len(await _take(stream)) == 2  # what was buffered, then the end
    finally:
        await asyncio.to_thread(sched.close)


async def test_exclusive_jobs_run_on_the_worker(scheduler):
    import threading

    name = await asyncio.wrap_future(scheduler.run_exclusive(lambda: threading.current_thread().name))
    assert name == "pocket-scheduler"
    with pytest.raises(ZeroDivisionError):
        await asyncio.wrap_future(scheduler.run_exclusive(lambda: 1 / 0))


async def test_a_consumer_that_goes_away_cancels_its_stream(scheduler, model):
    stream = _submit(scheduler, model, 3)

    async def consume() -> None:
        async for _ in stream.frames():
            await asyncio.sleep(3600)  # the session task is cancelled while holding a frame

    task = asyncio.create_task(consume())
    await eventually(lambda: stream.buffered or task.done(), "frames buffered behind the one the consumer holds")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the abandoned iterator is closed by the loop's async-generator finalizer
    await eventually(lambda: stream.cancelled, "the abandoned stream cancelled")
    await eventually(lambda: scheduler.load() == (0, 0), "the abandoned stream's row freed")


async def test_a_frame_that_does_not_come_times_out(model):
    import threading

    sched = BatchScheduler(model, max_streams=2, threads=1, frame_timeout_s=0.2)
    sched.start()
    release = threading.Event()
    try:
        busy = sched.run_exclusive(lambda: release.wait(10))  # the worker is stuck in a job
        stream = _submit(sched, model, 1)
        with pytest.raises(EngineError, match=r"no audio frame within 0.2 s; the TTS worker is overloaded") as info:
            await _take(stream)
        assert info.value.code == "engine_timeout"
        assert stream.cancelled
        release.set()
        assert await asyncio.wrap_future(busy) is True
    finally:
        release.set()
        await asyncio.to_thread(sched.close)


def test_a_steps_frames_reach_every_stream_of_a_loop_in_one_hand_off():
    from engines.pocket.scheduled_stream import hand_over

    class RecordingLoop:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def call_soon_threadsafe(self, callback, *args) -> None:
            self.calls.append((callback, args))

    owner = SimpleNamespace(high_water=8, decode_chunk=4, frame_timeout_s=1.0, wake=lambda: None)
    loops = [RecordingLoop(), RecordingLoop()]
    streams = [ScheduledStream(owner, "text", None, None, i, loops[i % 2]) for i in range(5)]
    frames = [np.full(1920, i, np.float32) for i in range(5)]
    hand_over([(stream, [frames[i]] * (1 + i % 2), i == 4) for i, stream in enumerate(streams)])
    assert [len(loop.calls) for loop in loops] == [1, 1]
    assert [s.buffered for s in streams] == [1, 2, 1, 2, 1] and [s.finished for s in streams] == [False] * 4 + [True]
    for loop in loops:
        callback, args = loop.calls[0]
        callback(*args)
    queued = [[s._queue.get_nowait() for _ in range(s._queue.qsize())] for s in streams]
    assert [len(q) for q in queued] == [1, 2, 1, 2, 2]  # the last one: its frame, then its end
    assert all(float(q[0][0]) == i for i, q in enumerate(queued))
    assert not isinstance(queued[4][1], np.ndarray)
