"""The sidecar frame format, both the blocking and the asyncio side."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
import pytest

from engines.asr.framing import (
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    FrameError,
    FrameRejected,
    encode_frame,
    pcm_from_bytes,
    pcm_to_bytes,
    read_frame,
    read_frame_async,
)


def test_a_frame_round_trips_with_its_payload():
    samples = np.array([0.0, 0.5, -1.0], dtype=np.float32)
    data = encode_frame({"op": "audio", "stream": "s1"}, pcm_to_bytes(samples)) + encode_frame({"op": "end"})
    stream = io.BytesIO(data)
    header, payload = read_frame(stream)
    assert header == {"op": "audio", "stream": "s1", "len": 12}
    assert np.array_equal(pcm_from_bytes(payload), samples)
    assert read_frame(stream) == ({"op": "end"}, b"")
    assert read_frame(stream) is None


async def test_the_async_reader_reads_the_same_frames():
    reader = asyncio.StreamReader()
    reader.feed_data(encode_frame({"ev": "final", "text": "hé"}) + encode_frame({"ev": "x"}, b"abcd"))
    reader.feed_eof()
    assert await read_frame_async(reader) == ({"ev": "final", "text": "hé"}, b"")
    assert await read_frame_async(reader) == ({"ev": "x", "len": 4}, b"abcd")
    assert await read_frame_async(reader) is None


@pytest.mark.parametrize(("data", "message"), [
    (b"not json\n", "frame header is not JSON"),
    (b"[1, 2]\n", "frame header is not a JSON object"),
    (b'{"len": -1}\n', "frame payload length -1 is invalid"),
    (b'{"len": 10}\nabc', "frame payload truncated (3 of 10 bytes)"),
    (b'{"op": "open"', "frame header is truncated"),
])
def test_a_broken_stream_is_a_frame_error(data, message):
    with pytest.raises(FrameError) as info:
        read_frame(io.BytesIO(data))
    assert str(info.value).startswith(message)


async def test_the_async_reader_rejects_a_payload_cut_short():
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"len": 8}\nabc')
    reader.feed_eof()
    with pytest.raises(FrameError, match="stream ended inside a frame payload"):
        await read_frame_async(reader)


def test_a_header_over_the_limit_is_refused_when_encoding():
    with pytest.raises(FrameError, match="exceeds"):
        encode_frame({"text": "x" * MAX_HEADER_BYTES})


def test_audio_payload_must_be_whole_float32_samples():
    with pytest.raises(FrameError, match="not whole float32 samples"):
        pcm_from_bytes(b"\x00\x00\x00")


def test_an_oversize_frame_is_rejected_and_skipped_so_the_next_frame_reads():
    big = {"op": "transcribe", "req": "r1", "len": MAX_PAYLOAD_BYTES + 1}
    stream = io.BytesIO(json.dumps(big).encode() + b"\n" + bytes(MAX_PAYLOAD_BYTES + 1) + encode_frame({"op": "end"}))
    with pytest.raises(FrameRejected) as info:
        read_frame(stream)
    assert (str(info.value), info.value.header, info.value.code) == (
        f"frame payload of {MAX_PAYLOAD_BYTES + 1} bytes exceeds {MAX_PAYLOAD_BYTES}", big, "too_large")
    assert read_frame(stream) == ({"op": "end"}, b"")


@pytest.mark.parametrize(("line", "message"), [
    (b"not json\n", "frame header is not JSON"),
    (b"[" * 5000 + b"]" * 5000 + b"\n", "frame header is nested too deeply"),
    (b'{"len": true}\n', "frame payload length True is invalid"),
    (b"x" * (MAX_HEADER_BYTES + 10) + b"\n", f"frame header exceeds {MAX_HEADER_BYTES} bytes"),
])
def test_a_header_that_cannot_be_used_is_rejected_and_the_next_frame_reads(line, message):
    stream = io.BytesIO(line + encode_frame({"op": "end"}))
    with pytest.raises(FrameRejected) as info:
        read_frame(stream)
    assert str(info.value).startswith(message)
    assert read_frame(stream) == ({"op": "end"}, b"")


async def test_the_async_reader_turns_deep_nesting_into_a_frame_error():
    reader = asyncio.StreamReader(limit=1 << 20)
    reader.feed_data(b"[" * 5000 + b"]" * 5000 + b"\n")
    reader.feed_eof()
    with pytest.raises(FrameError, match="nested too deeply"):
        await read_frame_async(reader)


def test_a_payload_over_the_limit_is_refused_when_encoding():
    with pytest.raises(FrameError) as info:
        encode_frame({"op": "transcribe"}, bytes(MAX_PAYLOAD_BYTES + 1))
    assert str(info.value) == f"frame payload of {MAX_PAYLOAD_BYTES + 1} bytes exceeds {MAX_PAYLOAD_BYTES}"
