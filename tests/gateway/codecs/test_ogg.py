"""Ogg framing: pages from FFmpeg's Ogg muxer are read in any chunking; pages
written here are read by libsndfile; corruption is named."""

from __future__ import annotations

import random
import struct

import pytest

from gateway.audio import AudioFormatError
from gateway.codecs.ogg import MAX_LOGICAL_STREAMS, MAX_PACKET_BYTES, OggPacket, OggReader, OggWriter, crc32
from tests.support.media import ffmpeg_file, tone


@pytest.fixture(scope="module")
def ogg_opus() -> bytes:
    return ffmpeg_file("ogg", "libopus", tone(1.0, 48000), 48000)


def read_all(data: bytes, chunk: int) -> list:
    reader = OggReader()
    packets = []
    for i in range(0, len(data), chunk):
        packets += list(reader.feed(data[i:i + chunk]))
    assert reader.pending_bytes == 0
    return packets


def test_crc_is_the_ogg_polynomial_unreflected():
    assert crc32(b"") == 0
    # the CRC catalogue's CRC-32/CKSUM (same polynomial, init 0) checks "123456789" as
    # 0x765E7680 after its final inversion; Ogg has no inversion
    assert crc32(b"123456789") == 0x765E7680 ^ 0xFFFFFFFF


@pytest.mark.parametrize("chunk", [1, 3, 27, 200, 1 << 20])
def test_ffmpeg_pages_read_the_same_in_any_chunking(ogg_opus, chunk):
    packets = read_all(ogg_opus, chunk)
    assert packets == read_all(ogg_opus, len(ogg_opus))
    assert packets[0].bos and packets[0].data.startswith(b"OpusHead")
    assert packets[1].data.startswith(b"OpusTags") and not packets[1].bos
    assert len(packets) == 2 + 51  # 50 packets of 20 ms and the encoder's tail
    assert packets[-1].granule == 312 + 48000  # pre-skip + one second


def test_a_packet_spanning_pages_is_joined():
    writer = OggWriter(7)
    big = bytes(range(256)) * 300  # 76800 bytes: needs 302 lacing values, more than one page
    lacing_first = b"\xff" * 255
    first = writer.page([], 0, bos=True)  # an empty page is legal; it begins the stream read
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, 0, -1, 7, 1, 0, 255)
    body = bytearray(header + lacing_first + big[:255 * 255])
    struct.pack_into("<I", body, 22, crc32(bytes(body)))
    rest = big[255 * 255:]
    tail_lacing = b"\xff" * (len(rest) // 255) + bytes([len(rest) % 255])
    tail = bytearray(struct.pack("<4sBBqIIIB", b"OggS", 0, 1, 100, 7, 2, 0, len(tail_lacing)) + tail_lacing + rest)
    struct.pack_into("<I", tail, 22, crc32(bytes(tail)))
    packets = read_all(first + bytes(body) + bytes(tail), 1000)
    assert [p.data for p in packets] == [big]
    assert packets[0].granule == 100


def test_written_pages_carry_flags_sequence_and_a_valid_checksum():
    writer = OggWriter(0x1234)
    one = writer.page([b"OpusHead" + bytes(11)], 0, bos=True)
    two = writer.page([b"x" * 300, b"y"], 960, eos=True)
    assert one[:4] == b"OggS" and one[5] == 0x02 and two[5] == 0x04
    assert struct.unpack_from("<qII", two, 6) == (960, 0x1234, 1)
    assert list(two[26:30]) == [3, 255, 45, 1]  # segments, then lacing 255+45 and 1
    assert [p.data for p in read_all(one + two, 5)] == [b"OpusHead" + bytes(11), b"x" * 300, b"y"]


def test_too_many_packets_for_one_page_is_refused():
    with pytest.raises(ValueError, match="256 packets need 256 lacing values; a page holds 255"):
        OggWriter(1).page([b"a"] * 256, 0)


def test_garbage_is_not_an_ogg_stream():
    with pytest.raises(AudioFormatError, match=r"^not an Ogg stream at byte 0 \(no 'OggS' page\)$"):
        list(OggReader().feed(b"RIFF\0\0\0\0WAVEfmt "))
    with pytest.raises(AudioFormatError, match=r"^not an Ogg stream at byte 0"):
        list(OggReader().feed(b"Og!"))


def test_a_flipped_byte_fails_the_checksum(ogg_opus):
    corrupt = bytearray(ogg_opus)
    corrupt[len(ogg_opus) // 2] ^= 0x40
    reader = OggReader()
    with pytest.raises(AudioFormatError, match=r"^Ogg page at byte \d+ fails its checksum \(corrupt stream\)$"):
        list(reader.feed(bytes(corrupt)))


def test_garbage_between_pages_is_named_with_its_offset(ogg_opus):
    reader = OggReader()
    first_page = 27 + 1 + ogg_opus[27]
    with pytest.raises(AudioFormatError, match=rf"^not an Ogg stream at byte {first_page} "):
        list(reader.feed(ogg_opus[:first_page] + b"garbage" + ogg_opus[first_page:]))


def test_version_other_than_zero_is_refused():
    page = bytearray(OggWriter(1).page([b"a"], 0))
    page[4] = 1
    with pytest.raises(AudioFormatError, match="has version 1; only 0 exists"):
        list(OggReader().feed(bytes(page)))


def test_an_endless_packet_is_cut_at_the_limit():
    writer = OggWriter(1)
    page = writer.page([], 0, bos=True)
    endless = b""
    chunk = b"z" * (255 * 255)
    for seq in range(1, 6):
        header = struct.pack("<4sBBqIIIB", b"OggS", 0, 1 if seq > 1 else 0, -1, 1, seq, 0, 255)
        body = bytearray(header + b"\xff" * 255 + chunk)
        struct.pack_into("<I", body, 22, crc32(bytes(body)))
        endless += bytes(body)
    with pytest.raises(AudioFormatError, match=f"an Ogg packet larger than {MAX_PACKET_BYTES} bytes"):
        list(OggReader().feed(page + endless))


def _table_crc(data: bytes) -> int:
    """The CRC as RFC 3533 describes it, bit by bit: the oracle for the zlib one."""
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


def test_the_crc_agrees_with_the_bitwise_definition_on_random_bytes():
    rng = random.Random(7)
    for size in (1, 2, 3, 255, 256, 4097):
        data = bytes(rng.randrange(256) for _ in range(size))
        assert crc32(data) == _table_crc(data)


def test_every_page_of_ffmpeg_and_libopus_files_checks_against_its_stored_crc(ogg_opus):
    made_by_libopus = ffmpeg_file("ogg", "libopus", tone(0.5, 16000), 16000, options={"b": "12000"})
    for data in (ogg_opus, made_by_libopus):
        pos, pages = 0, 0
        while pos < len(data):
            segments = data[pos + 26]
            size = 27 + segments + sum(data[pos + 27:pos + 27 + segments])
            page = bytearray(data[pos:pos + size])
            stored = struct.unpack_from("<I", page, 22)[0]
            page[22:26] = bytes(4)
            assert crc32(bytes(page)) == stored
            pos, pages = pos + size, pages + 1
        assert pages >= 3


def endless_page(serial: int, sequence: int, *, bos: bool = False) -> bytes:
    """A page of 255 lacing values of 255: its packet goes on to the next page."""
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, 0x02 if bos else 0x01, -1, serial, sequence, 0, 255)
    page = bytearray(header + b"\xff" * 255 + b"z" * (255 * 255))
    struct.pack_into("<I", page, 22, crc32(bytes(page)))
    return bytes(page)


def test_only_the_selected_stream_s_unfinished_packet_is_kept():
    reader = OggReader()
    assert [p.bos for p in reader.feed(OggWriter(1).page([b"OpusHead" + bytes(11)], 0, bos=True))] == [True]
    other = [list(reader.feed(endless_page(serial, 1))) for serial in range(2, 40)]  # never announced, never ending
    assert all(packets == [OggPacket(packets[0].serial, b"", False, -1, skipped=True)] for packets in other)
    assert reader.pending_bytes == 0
    list(reader.feed(endless_page(1, 1)))
    assert reader.pending_bytes == 255 * 255


def test_a_stream_other_than_the_selected_gives_its_header_only():
    reader = OggReader()
    writer = OggWriter(9)
    list(reader.feed(OggWriter(1).page([b"OpusHead" + bytes(11)], 0, bos=True)))
    header = list(reader.feed(writer.page([b"\x80theora" + bytes(30), b"more"], 0, bos=True)))
    assert [(p.serial, p.data, p.bos) for p in header] == [(9, b"\x80theora" + bytes(30), True)]
    assert [p.skipped for p in reader.feed(writer.page([b"frame"], 1))] == [True]
    reader.select(9)
    assert [p.data for p in reader.feed(writer.page([b"frame"], 2))] == [b"frame"]


def test_more_logical_streams_at_once_than_the_limit_is_refused():
    reader = OggReader()
    pages = [OggWriter(serial).page([b"fishead\0"], 0, bos=True) for serial in range(MAX_LOGICAL_STREAMS + 1)]
    for page in pages[:-1]:
        list(reader.feed(page))
    offset = sum(len(page) for page in pages[:-1])
    with pytest.raises(AudioFormatError) as refused:
        list(reader.feed(pages[-1]))
    assert str(refused.value) == (f"Ogg page at byte {offset} begins a logical stream while {MAX_LOGICAL_STREAMS} "
                                  f"are open; at most {MAX_LOGICAL_STREAMS} are accepted")


def test_streams_that_end_or_are_replaced_are_no_longer_open():
    reader = OggReader()
    for serial in range(3 * MAX_LOGICAL_STREAMS):  # a chain: each link begins, gives a packet, ends
        writer = OggWriter(serial)
        list(reader.feed(writer.page([b"OpusHead" + bytes(11)], 0, bos=True)))
        reader.select(serial)
        assert [p.data for p in reader.feed(writer.page([b"audio"], 960, eos=serial % 2 == 0))] == [b"audio"]
