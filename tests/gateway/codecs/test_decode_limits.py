"""Decoding live audio is bounded: each bomb of tests/support/stream_bombs.py,
fed to the decoder and the recognizer's resampler in a child process whose
address space is capped, is refused with a message naming the limit (or, for
PCM-like bytes that fix their own length, decoded) within a tracemalloc peak
that the unbounded decoder exceeds by far. Then the limits one by one."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio import AudioFormatError
from gateway.codecs.containers import OggOpusDecoder, WebmOpusDecoder
from gateway.codecs.limits import MAX_BYTES_WITHOUT_AUDIO, DecodeLimitExceeded
from gateway.codecs.opus import MAX_EMPTY_PACKETS_IN_A_ROW, OpusDecoder, frame_lengths, is_empty_packet
from tests.support.media import ffmpeg_file, opus_packets, tone
from tests.support.stream_bombs import (
    EMPTY_120MS,
    TINY_120MS,
    endless_packet_pages,
    ogg_opus_bomb,
    run_victim,
    webm_opus_bomb,
)

MIB = 1 << 20
EMPTY_RUN = (f"{MAX_EMPTY_PACKETS_IN_A_ROW + 1} Opus packets in a row carry no audio (every frame empty: DTX or "
             f"padding); at most {MAX_EMPTY_PACKETS_IN_A_ROW} are accepted, send the audio itself (turn DTX off)")


# Measured before decoding was bounded, under the same 1 GiB cap: the three Opus bombs
# raised MemoryError at a tracemalloc peak of 1.72-1.76 GB, the mu-law message peaked at
# 965 MB, the endless pages kept 28.7 MB and took 38 s of CPU.
@pytest.mark.parametrize(("bomb", "outcome", "bound"), [
    ("ogg-empty-frames", EMPTY_RUN, 8 * MIB),
    ("webm-empty-frames", EMPTY_RUN, 8 * MIB),
    ("ogg-tiny-frames", ("a message of 5203 bytes decodes to more than 14.9 s of audio; the limit is 1 s plus "
                        "3 kbit/s of its bytes (1 s per 375 bytes)"), 16 * MIB),
    ("mulaw-1mib", "ok", 64 * MIB),
    ("ogg-endless-pages", ("the Ogg stream sent 3134831 bytes without any audio; the limit is 2097152 bytes (2 MiB) "
                          "without audio"), 6 * MIB),
])
def test_a_bomb_is_refused_or_decoded_within_a_small_memory_bound(bomb: str, outcome: str, bound: int) -> None:
    result = run_victim(bomb)
    assert result["outcome"] == outcome
    assert result["peak_bytes"] < bound


@pytest.mark.parametrize(("packet", "lengths"), [
    (bytes([0x08]), [0]),  # code 0, TOC only
    (bytes([0x08, 1, 2, 3]), [3]),
    (bytes([0x09, 1, 2, 3, 4]), [2, 2]),  # code 1: two equal frames
    (bytes([0x09, 1, 2, 3]), None),  # code 1 with an odd payload
    (bytes([0x0A, 0]), [0, 0]),  # code 2: the first length 0, nothing after
    (bytes([0x0A, 1, 9, 8, 7]), [1, 2]),
    (bytes([0x0A, 252, 1]), None),  # a two-byte length that runs past the packet
    (EMPTY_120MS, [0] * 6),  # code 3 CBR: 6 frames, no bytes for them
    (TINY_120MS, [1, 1]),
    (bytes([0x0B, 0x43, 2]) + b"\0" * 5, [1, 1, 1]),  # code 3 CBR with 2 bytes of padding
    (bytes([0x0B, 0x82, 1]) + b"\0" * 4, [1, 3]),  # code 3 VBR
    (bytes([0x0B, 0x00]), None),  # code 3 with 0 frames
    (bytes([0x0B, 0x41, 255]), None),  # padding length that runs past the packet
])
def test_frame_lengths_follow_the_toc(packet: bytes, lengths: list[int] | None) -> None:
    assert frame_lengths(packet) == lengths
    assert is_empty_packet(packet) == (lengths is not None and not any(lengths))


def test_a_run_of_empty_packets_is_refused_until_a_real_one_comes() -> None:
    decoder = OpusDecoder()
    real = opus_packets(tone(0.1, 16000), 16000)[1]
    for _ in range(MAX_EMPTY_PACKETS_IN_A_ROW):
        assert len(decoder.decode(EMPTY_120MS)) == 5760  # concealment: a gap is fine
    with pytest.raises(AudioFormatError) as refused:
        decoder.decode(EMPTY_120MS)
    assert str(refused.value) == EMPTY_RUN
    assert len(decoder.decode(real)) == 960
    assert len(decoder.decode(EMPTY_120MS)) == 5760  # a new run


@pytest.fixture(scope="module")
def opus_6kbit() -> tuple[np.ndarray, bytes]:
    audio = tone(10.0, 48000)
    return audio, ffmpeg_file("ogg", "libopus", audio, 48000, options={"b": "6000"})


def test_honest_opus_at_6_kbit_s_is_inside_the_budget_in_one_message(opus_6kbit) -> None:
    audio, data = opus_6kbit
    assert len(data) < 10 * 6000 / 8 * 1.3  # really about 6 kbit/s
    assert len(audio) <= len(OggOpusDecoder().feed(data)) < len(audio) + 960  # the last packet decodes whole


def test_a_page_completed_by_a_one_byte_message_counts_the_bytes_before_it(opus_6kbit) -> None:
    audio, data = opus_6kbit
    decoder = OggOpusDecoder()
    decoded = sum(len(decoder.feed(data[i:i + 1])) for i in range(len(data)))
    assert len(audio) <= decoded < len(audio) + 960


def test_the_bomb_is_refused_however_it_is_cut() -> None:
    data = ogg_opus_bomb(200, TINY_120MS)
    decoder = OggOpusDecoder()
    with pytest.raises(DecodeLimitExceeded, match=r"^a message of 1 bytes \(with 1026 held from the messages before it\) decodes to more than 3\.7 s of audio; "):
        for i in range(len(data)):
            decoder.feed(data[i:i + 1])


def test_a_webm_stream_of_megabytes_without_audio_is_refused() -> None:
    header = webm_opus_bomb(0)
    void = 0xEC.to_bytes(1, "big") + b"\x01" + (4 * MIB).to_bytes(7, "big")  # a Void element, skipped unread
    decoder = WebmOpusDecoder()
    decoder.feed(header + void)
    decoder.feed(b"\0" * MIB)
    with pytest.raises(AudioFormatError) as refused:
        decoder.feed(b"\0" * MIB)
    assert str(refused.value) == (f"the WebM stream sent {len(header) + len(void) + 2 * MIB} bytes without any audio; "
                                  f"the limit is {MAX_BYTES_WITHOUT_AUDIO} bytes (2 MiB) without audio")


def ogg_pages(data: bytes) -> list[bytes]:
    pages, pos = [], 0
    while pos < len(data):
        segments = data[pos + 26]
        size = 27 + segments + sum(data[pos + 27:pos + 27 + segments])
        pages.append(data[pos:pos + size])
        pos += size
    return pages


def test_audio_resets_the_count_of_bytes_without_audio() -> None:
    audio = tone(1.0, 48000)
    pages = ogg_pages(ffmpeg_file("ogg", "libopus", audio, 48000))
    other = endless_packet_pages(MAX_BYTES_WITHOUT_AUDIO * 3 // 4, first_serial=1 << 20)  # another stream's pages
    decoder = OggOpusDecoder()
    decoder.feed(pages[0] + pages[1])  # OpusHead, OpusTags
    decoded = sum(len(decoder.feed(other + page + other)) for page in pages[2:])  # 3 MiB between pages of audio
    assert len(audio) <= decoded < len(audio) + 960
    with pytest.raises(AudioFormatError, match=f"^the Ogg stream sent {3 * len(other)} bytes without any audio; "):
        decoder.feed(other + other)  # with the one after the last page of audio
