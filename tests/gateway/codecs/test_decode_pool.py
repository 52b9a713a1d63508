"""Uploads are decoded in worker processes with a memory and a CPU limit: the
same samples as an in-process decode, one process kept across files, the
bombs costing the worker nothing, and each way a decode can end (past the
memory or CPU allowance, a crash, a hang, cancellation, a full pool, no PyAV)
answered with a clear error and a fresh worker."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from gateway.audio import AudioFormatError, write_wav
from gateway.child_env import child_environment
from gateway.codecs.decode_pool import DecodeLimits, DecoderPool
from gateway.codecs.files import decode_file
from gateway.codecs.pyav import CodecUnavailable
from gateway.errors import OverCapacity, Unavailable
from tests.gateway.codecs.test_files import made
from tests.support.file_bombs import png_track_bomb, sample_table_bomb
from tests.support.waiting import eventually

MISBEHAVING = "tests.gateway.codecs.misbehaving_worker"
CAP_S = 900.0


def status_kb(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` figure in kB (VmRSS, VmHWM ...)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def limits_of(pid: int) -> dict[str, tuple[str, str]]:
    """``/proc/<pid>/limits``: (soft, hard) by name."""
    with open(f"/proc/{pid}/limits", encoding="ascii") as limits:
        rows = limits.read().splitlines()[1:]
    return {row[:26].strip(): (row[26:47].strip(), row[47:68].strip()) for row in rows}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
async def pool() -> AsyncIterator[DecoderPool]:
    decoders = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=60), size=2, env=child_environment(os.environ))
    yield decoders
    await decoders.aclose()


async def test_a_file_decodes_in_another_process_to_the_same_samples(pool):
    data = made("m4a")
    decoded = await pool.decode(data, 16000, CAP_S)
    here = decode_file(data, 16000, CAP_S)
    assert (decoded.source_rate, decoded.container, decoded.codec) == (44100, "mov", "aac")
    assert np.array_equal(decoded.samples, here.samples)
    assert len(pool.pids) == 1 and pool.pids[0] != os.getpid()


async def test_one_worker_serves_file_after_file(pool):
    await pool.decode(made("wav"), 16000, CAP_S)
    first = pool.pids
    for kind in ("flac", "mp3", "ogg-opus"):
        await pool.decode(made(kind), 16000, CAP_S)
    assert pool.pids == first


async def test_the_worker_runs_under_its_limits(pool):
    await pool.decode(made("wav"), 16000, CAP_S)
    (pid,) = pool.pids
    limits = limits_of(pid)
    soft, hard = limits["Max address space"]
    assert soft == hard  # nothing in the worker can lift it
    headroom_mb = (int(soft) - status_kb(pid, "VmSize") * 1024) / 2**20
    assert 448 <= headroom_mb <= 512  # its loaded size + 512 MB, less what one WAV left mapped
    assert 60 <= int(limits["Max cpu time"][0]) <= 65  # what it has used (a second or so) + 60
    assert limits["Max core file size"] == ("0", "0")


async def test_the_bombs_cost_the_worker_under_100_mb(pool):
    await pool.decode(made("wav"), 16000, CAP_S)
    (pid,) = pool.pids
    loaded_kb = status_kb(pid, "VmRSS")
    with pytest.raises(AudioFormatError, match=r"^track 1 \(sound\) of the MP4 file declares 68719476736 samples"):
        await pool.decode(sample_table_bomb(), 16000, CAP_S)
    decoded = await pool.decode(png_track_bomb(), 16000, CAP_S)
    assert len(decoded.samples) == 32768
    assert pool.pids == [pid]
    assert (status_kb(pid, "VmHWM") - loaded_kb) // 1024 < 100


def long_quiet_wav(minutes: float) -> bytes:
    """8 kHz 8-bit PCM: a minute in 480 KB, decoding to 3.8 MB of float32 at 16 kHz."""
    header = bytearray(write_wav(np.zeros(0, dtype=np.float32), 8000))
    header[34:36] = (8).to_bytes(2, "little")
    header[32:34] = (1).to_bytes(2, "little")
    header[28:32] = (8000).to_bytes(4, "little")
    samples = int(minutes * 60 * 8000)
    header[40:44] = samples.to_bytes(4, "little")
    return bytes(header) + b"\x80" * samples


async def test_a_file_needing_more_memory_than_allowed_is_refused_and_the_worker_replaced():
    pool = DecoderPool(DecodeLimits(memory_mb=64, cpu_s=60), size=1, env=child_environment(os.environ))
    try:
        with pytest.raises(AudioFormatError) as info:
            await pool.decode(long_quiet_wav(14.0), 16000, CAP_S)  # 54 MB of samples, held twice while resampled
        assert str(info.value) == "decoding it needs more than the 64 MB of memory a file may use"
        decoded = await pool.decode(long_quiet_wav(1.0), 16000, CAP_S)
        assert len(decoded.samples) == 16000 * 60
    finally:
        await pool.aclose()


@pytest.fixture
async def misbehaving() -> AsyncIterator[DecoderPool]:
    decoders = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=1, wall_s=30), size=1, env=child_environment(os.environ),
                           module=MISBEHAVING, wait_s=0.2)
    yield decoders
    await decoders.aclose()


async def test_a_file_past_the_cpu_allowance_is_refused(misbehaving):
    await misbehaving.decode(made("wav"), 16000, CAP_S)
    (pid,) = misbehaving.pids
    with pytest.raises(AudioFormatError) as info:
        await misbehaving.decode(b"SPIN", 16000, CAP_S)
    assert str(info.value) == "decoding it takes more than the 1 s of CPU time a file may use"
    assert gone(pid)
    await eventually(lambda: len(misbehaving.pids) == 1, "a fresh worker")
    assert len((await misbehaving.decode(made("wav"), 16000, CAP_S)).samples) == 32000


async def test_a_worker_that_crashes_on_a_file_is_a_refusal_of_that_file(misbehaving):
    with pytest.raises(AudioFormatError) as info:
        await misbehaving.decode(b"ABORT", 16000, CAP_S)
    assert str(info.value) == ("the decoder process ended on this file (signal SIGABRT); it may need more than the "
                               "512 MB of memory a file may use")
    assert len((await misbehaving.decode(made("wav"), 16000, CAP_S)).samples) == 32000


async def test_a_decode_past_its_wall_clock_bound_is_retryable_and_the_worker_killed():
    pool = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=60, wall_s=2), size=1, env=child_environment(os.environ),
                       module=MISBEHAVING)
    try:
        hanging = asyncio.create_task(pool.decode(b"HANG", 16000, CAP_S))
        await eventually(lambda: len(pool.pids) == 1, "the worker started")
        (pid,) = pool.pids
        with pytest.raises(Unavailable) as info:
            await hanging
        assert (info.value.code, info.value.message, info.value.retry_after_s) == (
            "asr_timeout", "decoding the file did not finish within 2 s; the server is busy, retry", 5)
        assert gone(pid)
    finally:
        await pool.aclose()


async def test_a_full_pool_answers_over_capacity_and_a_cancelled_decode_kills_its_worker(misbehaving):
    await misbehaving.decode(made("wav"), 16000, CAP_S)
    (pid,) = misbehaving.pids
    hanging = asyncio.create_task(misbehaving.decode(b"HANG", 16000, CAP_S))
    await eventually(lambda: misbehaving.busy == 1, "the one worker taken")
    with pytest.raises(OverCapacity) as info:
        await misbehaving.decode(made("wav"), 16000, CAP_S)
    assert (info.value.message, info.value.retry_after_s) == ("all 1 file decoders are busy; try again later", 5)
    hanging.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hanging
    assert gone(pid)


async def test_closing_the_pool_ends_every_worker():
    pool = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=60), size=2, env=child_environment(os.environ))
    await asyncio.gather(pool.decode(made("wav"), 16000, CAP_S), pool.decode(made("flac"), 16000, CAP_S))
    pids = pool.pids
    assert len(pids) == 2
    await pool.aclose()
    assert all(gone(pid) for pid in pids)
    with pytest.raises(Unavailable, match="^the server is stopping$"):
        await pool.decode(made("wav"), 16000, CAP_S)


async def test_without_pyav_wav_still_decodes(tmp_path: Path):
    fake = tmp_path / "av"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('PyAV is not installed here')\n")
    env = {**child_environment(os.environ), "PYTHONPATH": str(tmp_path)}
    pool = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=60), size=1, env=env)
    try:
        assert len((await pool.decode(made("wav"), 16000, CAP_S)).samples) == 32000
        with pytest.raises(CodecUnavailable, match=r"^compressed audio needs PyAV \(FFmpeg\), which is not "
                                                   r"installed: pip install 'av>=14'$"):
            await pool.decode(made("m4a"), 16000, CAP_S)
    finally:
        await pool.aclose()


async def test_a_worker_that_cannot_start_is_codec_unavailable(tmp_path: Path):
    pool = DecoderPool(DecodeLimits(memory_mb=512, cpu_s=60), size=1, env=child_environment(os.environ),
                       python=str(tmp_path / "no-python"))
    with pytest.raises(CodecUnavailable, match=r"^the file decoder process cannot start: "):
        await pool.decode(made("wav"), 16000, CAP_S)
    await pool.aclose()


async def test_the_memory_cap_alone_holds_the_sample_table_bomb():
    """With the table check out of the way, FFmpeg asks for its 1.5 GB index
    inside a worker capped at 256 MB: the allocation fails there, the file is
    refused and the worker's resident memory never grows past its cap."""
    pool = DecoderPool(DecodeLimits(memory_mb=256, cpu_s=60), size=1, env=child_environment(os.environ), module=MISBEHAVING)
    try:
        await pool.decode(made("wav"), 16000, CAP_S)
        (pid,) = pool.pids
        loaded_kb = status_kb(pid, "VmRSS")
        with pytest.raises(AudioFormatError) as info:
            await pool.decode(b"UNCHECKED" + sample_table_bomb(), 16000, CAP_S)
        assert str(info.value) == "the MP4/M4A file holds no decodable audio"  # FFmpeg's index could not be made
        assert (status_kb(pid, "VmHWM") - loaded_kb) // 1024 < 256
        assert pool.pids == [pid]
    finally:
        await pool.aclose()


async def test_a_worker_left_grown_by_a_file_answers_it_then_makes_way_for_a_fresh_one():
    pool = DecoderPool(DecodeLimits(memory_mb=256, cpu_s=60), size=1, env=child_environment(os.environ), module=MISBEHAVING)
    try:
        await pool.decode(made("wav"), 16000, CAP_S)
        (pid,) = pool.pids
        decoded = await pool.decode(b"LEAK" + made("wav"), 16000, CAP_S)  # 160 MB kept: over half of 256
        assert len(decoded.samples) == 32000
        await eventually(lambda: gone(pid), "the grown worker ended and reaped")
        # (the pool may still list the old worker for a moment after it was reaped)
        await eventually(lambda: len(pool.pids) == 1 and pool.pids != [pid], "a fresh worker in its place")
    finally:
        await pool.aclose()
