"""The streaming WebM reader against FFmpeg's WebM/Matroska muxer, and on
hand-built elements for what FFmpeg does not write (lacing, live sizes)."""

from __future__ import annotations

import pytest

from gateway.audio import AudioFormatError
from gateway.codecs.webm import AudioTrack, WebmReader, block_frames, read_vint
from tests.support.media import ffmpeg_file, ffmpeg_video_only, tone


def element(ident: int, body: bytes, *, unknown_size: bool = False) -> bytes:
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else b"\x01" + len(body).to_bytes(7, "big")
    return ident.to_bytes((ident.bit_length() + 7) // 8, "big") + size + body


EBML_HEADER = element(0x1A45DFA3, element(0x4282, b"webm"))


def tracks(codec: bytes = b"A_OPUS", kind: int = 2, private: bytes = b"") -> bytes:
    entry = element(0xD7, b"\x01") + element(0x83, bytes([kind])) + element(0x86, codec)
    if private:
        entry += element(0x63A2, private)
    return element(0x1654AE6B, element(0xAE, entry))


def simple_block(track: int, payload: bytes, flags: int = 0x80) -> bytes:
    return element(0xA3, bytes([0x80 | track]) + b"\x00\x00" + bytes([flags]) + payload)


def read(data: bytes, chunk: int) -> list:
    reader = WebmReader()
    out = []
    for i in range(0, len(data), chunk):
        out += list(reader.feed(data[i:i + chunk]))
    return out


@pytest.fixture(scope="module")
def webm() -> bytes:
    return ffmpeg_file("webm", "libopus", tone(1.0, 48000), 48000)


@pytest.mark.parametrize("chunk", [1, 5, 64, 4096, 1 << 20])
def test_ffmpeg_webm_reads_the_same_in_any_chunking(webm, chunk):
    items = read(webm, chunk)
    assert items == read(webm, len(webm))
    track = items[0]
    assert isinstance(track, AudioTrack)
    assert (track.codec, track.channels, track.sample_rate, track.number) == ("A_OPUS", 1, 48000.0, 1)
    assert track.codec_private.startswith(b"OpusHead")
    assert len(items) == 1 + 51 and all(isinstance(frame, bytes) for frame in items[1:])


def test_live_sizes_and_skipped_elements_are_walked_through():
    """MediaRecorder's shape: Segment and Cluster of unknown size, a Void and a
    Cues element to skip, blocks of another track to ignore."""
    segment = (tracks() + element(0xEC, b"\0" * 100) + element(0x1F43B675, element(0xE7, b"\x00")
               + simple_block(1, b"one") + simple_block(2, b"video") + simple_block(1, b"two"), unknown_size=True)
               + element(0x1C53BB6B, b"cues" * 50))
    data = EBML_HEADER + element(0x18538067, segment, unknown_size=True)
    items = read(data, 3)
    assert items[1:] == [b"one", b"two"]


def test_block_group_blocks_are_frames_too():
    data = EBML_HEADER + tracks() + element(0xA0, element(0xA1, b"\x81\x00\x00\x00" + b"grouped"))
    assert read(data, 1000)[1:] == [b"grouped"]


def test_xiph_ebml_and_fixed_lacing_are_undone():
    frames = [b"a" * 300, b"b" * 2, b"c" * 5]
    xiph = b"\x81\x00\x00\x02" + bytes([2, 255, 45, 2]) + b"".join(frames)
    assert block_frames(xiph) == (1, frames)
    # EBML lacing: first size 300 as a 2-byte vint, then a signed difference (2 - 300 = -298)
    ebml = b"\x81\x00\x00\x06" + bytes([2]) + (0x4000 | 300).to_bytes(2, "big") \
        + (0x4000 | (-298 + 8191)).to_bytes(2, "big") + b"".join(frames)
    assert block_frames(ebml) == (1, frames)
    fixed = b"\x81\x00\x00\x04" + bytes([2]) + b"xyzxyzxyz"
    assert block_frames(fixed) == (1, [b"xyz", b"xyz", b"xyz"])


def test_lacing_that_overruns_its_block_is_refused():
    with pytest.raises(AudioFormatError, match="lace sizes larger than the block"):
        block_frames(b"\x81\x00\x00\x02" + bytes([1, 200]) + b"short")
    with pytest.raises(AudioFormatError, match="fixed lacing that does not divide the block"):
        block_frames(b"\x81\x00\x00\x04" + bytes([1]) + b"odd")


def test_video_only_has_no_audio_track():
    with pytest.raises(AudioFormatError, match=r"^the stream has no audio track \(found: video V_MPEG4/ISO/ASP\)$"):
        read(ffmpeg_video_only("matroska"), 100)


def test_garbage_is_not_a_webm_stream():
    with pytest.raises(AudioFormatError, match=r"^not a WebM stream \(no EBML header at its start\)$"):
        read(b"OggS\0\x02" + bytes(40), 7)


def test_another_ebml_document_type_is_refused():
    with pytest.raises(AudioFormatError, match=r"^not a WebM stream \(EBML document type b'mkv3d'\)$"):
        read(element(0x1A45DFA3, element(0x4282, b"mkv3d")), 100)


def test_a_block_before_tracks_is_refused():
    with pytest.raises(AudioFormatError, match=r"^malformed WebM: a block before the Tracks element$"):
        read(EBML_HEADER + simple_block(1, b"early"), 100)


def test_a_huge_element_is_refused_before_it_is_buffered():
    huge = EBML_HEADER + b"\x16\x54\xae\x6b" + b"\x01" + (50 << 20).to_bytes(7, "big")
    with pytest.raises(AudioFormatError, match=r"^WebM element 0x1654AE6B of 52428800 bytes; the limit is 1048576"):
        read(huge, 100)


def test_an_unsized_leaf_is_refused():
    with pytest.raises(AudioFormatError, match=r"^malformed WebM: element 0x1654AE6B at byte \d+ has no size$"):
        read(EBML_HEADER + element(0x1654AE6B, b"", unknown_size=True), 100)


def test_vint_sizes_and_ids():
    assert read_vint(b"\x81", 0, keep_marker=False) == (1, 1)
    assert read_vint(b"\x40\x02", 0, keep_marker=False) == (2, 2)
    assert read_vint(b"\xff", 0, keep_marker=False) == (-1, 1)  # unknown
    assert read_vint(b"\x1a\x45\xdf\xa3", 0, keep_marker=True) == (0x1A45DFA3, 4)
    assert read_vint(b"\x1a\x45", 0, keep_marker=True) is None  # more to come
    with pytest.raises(AudioFormatError, match="longer than 8 bytes"):
        read_vint(b"\x00\x01", 0, keep_marker=False)
