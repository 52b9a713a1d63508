"""The sidecar frame format, both the blocking and the asyncio side."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest

from engines.asr.framing import (
    MAX_HEADER_BYTES,
    FrameError,
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
    (b'{"op": "open"', "frame header is too long or truncated"),
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
