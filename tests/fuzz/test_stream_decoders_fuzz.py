"""The live-audio decoders fed anything: Ogg pages with valid checksums and any
flags, serials and lacing; WebM elements of any shape; Opus packets of any
TOC. Each message gives samples or an ``AudioFormatError`` (never another
exception), never more audio than the budget of gateway/codecs/limits.py allows, and
a tracemalloc peak that stays small whatever the input."""

from __future__ import annotations

import itertools
import struct
import tracemalloc
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gateway.audio import AudioFormatError
from gateway.codecs.containers import OggOpusDecoder, WebmOpusDecoder
from gateway.codecs.decoders import OpusPacketDecoder
from gateway.codecs.limits import MESSAGE_FLOOR_S, MIN_BITS_PER_S
from gateway.codecs.ogg import CAPTURE, HEADER, crc32
from tests.support.media import opus_packets, tone
from tests.support.stream_bombs import EMPTY_120MS, OPUS_HEAD, OPUS_TAGS, TINY_120MS, webm_opus_bomb

PEAK_BYTES = 8 * 1024 * 1024
RATE = 48000

TOCS = st.integers(min_value=0, max_value=255)
REAL_PACKETS = opus_packets(tone(0.2, 48000), 48000)  # libopus's own, so that much of the input decodes
OPUS_PACKETS = st.one_of(
    st.sampled_from(REAL_PACKETS), st.sampled_from(REAL_PACKETS), st.sampled_from([EMPTY_120MS, TINY_120MS, b""]),
    st.builds(lambda toc, rest: bytes([toc]) + rest, TOCS, st.binary(max_size=40)))


def ogg_page(serial: int, flags: int, packets: list[bytes], continued_tail: int) -> bytes:
    """A page of ``packets`` whose checksum is right, so the reader looks past it;
    ``continued_tail`` more 255-byte segments leave a packet open at its end."""
    lacing = bytearray()
    for packet in packets:
        lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
    lacing += b"\xff" * continued_tail
    lacing = lacing[:255]
    body = b"".join(packets) + b"\0" * (255 * continued_tail)
    body = body[:sum(lacing)].ljust(sum(lacing), b"\0")
    page = bytearray(HEADER.pack(CAPTURE, 0, flags, -1, serial, 0, 0, len(lacing)) + lacing + body)
    struct.pack_into("<I", page, 22, crc32(bytes(page)))
    return bytes(page)


OGG_PAGES = st.builds(ogg_page, st.sampled_from([1, 1, 1, 2, 3]) | st.integers(0, 2**32 - 1),
                      st.sampled_from([0, 0, 0, 1, 4]) | st.integers(0, 7),
                      st.lists(OPUS_PACKETS | st.sampled_from([OPUS_HEAD, OPUS_TAGS]), max_size=12),
                      st.integers(0, 3))
TRAILING_GARBAGE = st.one_of(st.just(b""), st.just(b""), st.binary(max_size=30))
OGG_STREAMS = st.builds(lambda pages, tail: ogg_page(1, 2, [OPUS_HEAD], 0) + ogg_page(1, 0, [OPUS_TAGS], 0)
                        + b"".join(pages) + tail, st.lists(OGG_PAGES, min_size=1, max_size=8), TRAILING_GARBAGE)


def ebml(ident: int, body: bytes) -> bytes:
    return ident.to_bytes((ident.bit_length() + 7) // 8, "big") + b"\x01" + len(body).to_bytes(7, "big") + body


WEBM_BLOCKS = st.builds(lambda lacing, frames, raw: ebml(0xA3, b"\x81\x00\x00" + bytes([0x80 | lacing << 1])
                                                             + (bytes([len(frames) - 1]) if lacing else b"")
                                                             + b"".join(frames) + raw),
                        st.sampled_from([0, 0, 1, 2, 3]), st.lists(OPUS_PACKETS, min_size=1, max_size=20),
                        st.sampled_from([b""]) | st.binary(max_size=8))
WEBM_STREAMS = st.builds(lambda blocks, tail: webm_opus_bomb(0) + b"".join(blocks) + tail,
                         st.lists(WEBM_BLOCKS, min_size=1, max_size=8), TRAILING_GARBAGE)


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(point, len(data)) for point in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def feed_bounded(decoder: Any, messages: list[bytes]) -> None:
    """Every message decodes within its budget or raises AudioFormatError; a
    container stays refused after its first error, as a session closes it."""
    tracemalloc.start()
    try:
        carried = 0
        for message in messages:
            allowed = (MESSAGE_FLOOR_S + (len(message) + carried) * 8 / MIN_BITS_PER_S) * RATE
            try:
                samples = decoder.feed(message)
            except AudioFormatError:
                return
            assert isinstance(samples, np.ndarray) and samples.dtype == np.float32
            assert len(samples) <= allowed
            carried += len(message)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES


@given(OGG_STREAMS, st.lists(st.integers(0, 5000), max_size=6))
def test_ogg_streams(data: bytes, cuts: list[int]) -> None:
    feed_bounded(OggOpusDecoder(), cut(data, cuts))


@given(WEBM_STREAMS, st.lists(st.integers(0, 5000), max_size=6))
def test_webm_streams(data: bytes, cuts: list[int]) -> None:
    feed_bounded(WebmOpusDecoder(), cut(data, cuts))


@given(st.lists(OPUS_PACKETS, min_size=1, max_size=30))
def test_raw_opus_packets(packets: list[bytes]) -> None:
    decoder = OpusPacketDecoder()
    tracemalloc.start()
    try:
        for packet in packets:
            try:
                samples = decoder.feed(packet)
            except AudioFormatError:
                continue  # the message is dropped; the next one decodes
            assert len(samples) <= RATE * 120 // 1000  # RFC 6716: a packet holds at most 120 ms
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES
