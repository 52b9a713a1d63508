"""MP4 / MOV / M4A sample tables are checked before FFmpeg sizes its index from
them: files from FFmpeg's own muxers pass; tables that claim more samples than
the duration cap allows, more entries than their bytes hold, or a length past
the cap are refused with the reason, reading headers only."""

from __future__ import annotations

import struct

import pytest

from gateway.audio import AudioFormatError, AudioTooLong
from gateway.codecs.mp4_tables import check_sample_tables
from tests.support.file_bombs import (
    box,
    decode_in_capped_child,
    fragmented_mp4,
    full_box,
    honest_pcm_m4a,
    m4a,
    pcm_track,
    png_track_bomb,
    sample_table_bomb,
)
from tests.support.media import ffmpeg_file, tone

CAP_S = 900.0  # the route's 15 minutes


@pytest.mark.parametrize(("container", "codec"), [("ipod", "aac"), ("mp4", "aac"), ("mov", "aac"),
                                                  ("mov", "pcm_s16le"), ("mp4", "flac"), ("mp4", "libopus")])
def test_files_from_ffmpegs_muxers_pass(container, codec):
    rate = 48000 if codec == "libopus" else 16000
    check_sample_tables(ffmpeg_file(container, codec, tone(3.0, rate), rate), CAP_S)


def test_a_fragmented_mp4_from_ffmpeg_passes():
    check_sample_tables(fragmented_mp4(3.0), CAP_S)


def test_an_honest_hand_made_pcm_track_passes():
    check_sample_tables(honest_pcm_m4a(2.0), CAP_S)


def test_a_mov_with_a_picture_track_passes_the_tables():
    """Its cost is in the picture, not the tables: the decoder whitelist is what stops it."""
    check_sample_tables(png_track_bomb(), CAP_S)


def test_two_to_the_30_samples_per_chunk_are_refused():
    with pytest.raises(AudioFormatError) as info:
        check_sample_tables(sample_table_bomb(), CAP_S)
    assert str(info.value) == ("track 1 (sound) of the MP4 file declares 68719476736 samples; at most 43200000 fit "
                               "in the 15 min limit (48000 a second)")


def test_a_constant_sample_size_with_a_huge_count_is_refused():
    track = pcm_track(timescale=16000, stts=[(32, 1)], stsc=[(1, 32)], sample_size=2, sample_count=0xFFFFFFFF,
                      chunk_offsets=[0])
    with pytest.raises(AudioFormatError, match=r"^track 1 \(sound\) of the MP4 file declares 4294967295 samples; "):
        check_sample_tables(m4a(track), CAP_S)


def test_a_time_to_sample_table_past_the_cap_is_too_long():
    track = pcm_track(timescale=16000, stts=[(16000 * 60 * 16, 1)], stsc=[(1, 1024)], sample_size=2,
                      sample_count=32, chunk_offsets=[0])
    with pytest.raises(AudioTooLong, match=r"^audio of 16\.0 min; the limit is 15 min$"):
        check_sample_tables(m4a(track), CAP_S)


def test_a_non_sound_track_may_declare_240_samples_a_second():
    def video(count: int) -> bytes:
        return m4a(pcm_track(timescale=25, stts=[(count, 1)], stsc=[(1, 1)], sample_size=1, sample_count=count,
                             chunk_offsets=[0] * count, handler=b"vide"))

    check_sample_tables(video(240 * 900), CAP_S)
    with pytest.raises(AudioFormatError) as info:
        check_sample_tables(video(240 * 900 + 1), CAP_S)
    assert str(info.value) == ("track 1 ('vide') of the MP4 file declares 216001 samples; at most 216000 fit in "
                               "the 15 min limit (240 a second)")


@pytest.mark.parametrize(("kind", "entry"), [(b"stts", 8), (b"stsc", 12), (b"stco", 4), (b"co64", 8), (b"ctts", 8),
                                             (b"stss", 4)])
def test_a_table_claiming_more_entries_than_its_bytes_is_refused(kind, entry):
    table = full_box(kind, 0, struct.pack(">I", 1000) + b"\0" * (entry * 3))
    trak = box(b"trak", box(b"mdia", box(b"minf", box(b"stbl", table))))
    with pytest.raises(AudioFormatError) as info:
        check_sample_tables(m4a(trak), CAP_S)
    assert str(info.value) == (f"the MP4 file's '{kind.decode()}' table claims 1000 entries ({1000 * entry} bytes) "
                               f"in {entry * 3} bytes")


def test_a_sample_size_table_claiming_more_than_its_bytes_is_refused():
    stsz = full_box(b"stsz", 0, struct.pack(">II", 0, 1 << 20) + b"\0" * 40)
    with pytest.raises(AudioFormatError, match=r"^the MP4 file's 'stsz' table claims 1048576 entries \(4194304 "
                                               r"bytes\) in 40 bytes$"):
        check_sample_tables(m4a(box(b"trak", box(b"mdia", box(b"minf", box(b"stbl", stsz))))), CAP_S)


def fragment(count: int, flags: int = 0, entries: bytes = b"", track_id: int = 1) -> bytes:
    return box(b"moof", box(b"traf", full_box(b"tfhd", 0, struct.pack(">I", track_id)),
                            full_box(b"trun", 0, struct.pack(">I", count) + entries, flags=flags)))


def test_fragment_runs_count_toward_their_track():
    honest = honest_pcm_m4a(0.1)  # its track has ID 1
    check_sample_tables(honest + fragment(48000 * 900), CAP_S)
    with pytest.raises(AudioFormatError, match=r"^track 1 \(sound\) of the MP4 file declares 43200001 samples; "):
        check_sample_tables(honest + fragment(48000 * 900 - 10) + fragment(11), CAP_S)
    with pytest.raises(AudioFormatError, match=r"^the MP4 file's fragments declare 43200001 samples; at most "
                                               r"43200000 fit in the 15 min limit$"):
        check_sample_tables(honest + fragment(48000 * 900 + 1, track_id=7), CAP_S)


def test_a_fragment_run_claiming_more_sample_fields_than_its_bytes_is_refused():
    with pytest.raises(AudioFormatError, match=r"^the MP4 file's 'trun' table claims 100 entries \(800 bytes\) in "
                                               r"16 bytes$"):
        check_sample_tables(honest_pcm_m4a(0.1) + fragment(100, 0x300 | 0x1, b"\0" * 20), CAP_S)


def test_a_compressed_movie_header_is_refused():
    with pytest.raises(AudioFormatError, match=r"^the MP4 file's movie header is compressed \(cmov\), which is not "
                                               r"accepted$"):
        check_sample_tables(m4a(box(b"cmov", box(b"dcom", b"zlib"))), CAP_S)


def test_malformed_box_structure_is_refused():
    with pytest.raises(AudioFormatError, match=r"^the MP4 file has a 'moov' box of 4 bytes, shorter than its header$"):
        check_sample_tables(struct.pack(">I", 4) + b"moov" + b"\0" * 8, CAP_S)
    nested = b""
    for _ in range(12):
        nested = box(b"trak", nested)
    with pytest.raises(AudioFormatError, match=r"^the MP4 file nests boxes more than 10 deep$"):
        check_sample_tables(nested, CAP_S)
    with pytest.raises(AudioFormatError, match=r"^the MP4 file has more than 100000 boxes$"):
        check_sample_tables(box(b"moov", b"\0\0\0\x08free" * 100_001), CAP_S)


def test_a_truncated_table_is_read_as_far_as_it_goes():
    whole = honest_pcm_m4a(0.1)
    check_sample_tables(whole[:len(whole) - 100], CAP_S)  # the mdat is cut: FFmpeg says what is wrong


def test_the_sample_table_bomb_costs_the_decoding_process_no_memory():
    """Decoded in a fresh process under an address-space cap: its peak resident
    memory grows by well under 100 MB (by 1,519 MB when FFmpeg read the tables)."""
    outcome, grown_mb = decode_in_capped_child("sample_table_bomb")
    assert grown_mb < 100, f"the decode grew by {grown_mb} MB ({outcome})"
    assert outcome == "AudioFormatError"
