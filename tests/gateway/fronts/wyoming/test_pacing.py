"""A Wyoming transcription is paced to real time by the shared dictation session:
a client that pushes minutes of audio at once has at most
``dictation_max_ahead_s`` (plus the chunk being read) taken ahead of real
time; the connection reads nothing more until real time catches up, so TCP
pushes back on the client, and nothing is dropped. The pacer's clock is a fake
whose pauses end only when the test lets them, so no test waits on time."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop

from gateway.drain import Drainer
from tests.gateway.fronts.wyoming.harness import RATE, connect, pcm, read_until, the_stream, wyoming_server
from tests.support.fake_sidecar import FakeSidecar
from tests.support.pacing_clock import PacingClock, install
from tests.support.waiting import eventually

PUSHED_S = 300  # seconds of speech, pushed in one go, one second a chunk
WAIT_S = 10.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> PacingClock:
    return install(monkeypatch, PacingClock(held=True))


async def test_300_s_pushed_at_once_is_read_no_faster_than_real_time_plus_the_allowance(tmp_path, clock):
    fake = FakeSidecar()
    second = pcm(np.full(RATE, 0.1, dtype=np.float32))
    async with wyoming_server(tmp_path, asr=fake, dictation_max_ahead_s=1) as server, connect(server) as client:
        async def push() -> None:
            await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            for _ in range(PUSHED_S):
                await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=second).event())
            await client.write_event(AudioStop().event())

        pusher = asyncio.create_task(push())
        stream = await the_stream(fake)

        def taken_s() -> float:
            return len(fake.audio_sent(stream.id)) / RATE

        for pauses in range(1, 6):
            await eventually(lambda: len(clock.pauses) == pauses, f"pause {pauses} of the reading")  # noqa: B023
            await asyncio.sleep(0.05)  # room for a read that should not happen
            elapsed_s = clock.now - 100.0
            # the allowance (1 s) and the chunk whose reading made the stream too far ahead
            assert (taken_s(), elapsed_s) == (elapsed_s + 1 + 1, pauses - 1)
            clock.released.release()
        clock.free = True
        clock.released.release()
        await asyncio.wait_for(pusher, WAIT_S)
        events = await read_until(client, "transcript-stop")
        assert taken_s() == PUSHED_S  # nothing dropped
    assert [e.type for e in events] == ["transcript-start", "transcript", "transcript-stop"]
    assert clock.pauses == [1.0] * (PUSHED_S - 1)  # every chunk past the allowance waited its own length


async def test_the_drain_ends_a_pause_and_the_audio_read_so_far_is_answered(tmp_path):
    fake = FakeSidecar()
    minute = pcm(np.full(60 * RATE, 0.1, dtype=np.float32))  # one chunk: held to real time, 58 s of pauses
    async with wyoming_server(tmp_path, asr=fake, dictation_max_ahead_s=1) as server, connect(server) as client:
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=minute).event())
        stream = await the_stream(fake)
        # the allowance and the step that went past it are taken, then the pacing pauses
        await eventually(lambda: len(fake.audio_sent(stream.id)) >= 2 * RATE, "the pacing's first pause")
        drain = asyncio.create_task(Drainer(server.state["sessions"], 30.0).run())
        events = await read_until(client, "transcript-stop")  # within the read timeout, long before 58 s
        assert await asyncio.wait_for(drain, WAIT_S) is True
        taken = len(fake.audio_sent(stream.id))
    assert [e.type for e in events] == ["transcript-start", "transcript", "transcript-stop"]
    assert taken == 60 * RATE  # the minute read before the drain was all taken, not dropped
