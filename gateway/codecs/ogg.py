"""Ogg framing (RFC 3533): a page writer and a streaming page reader.

Pages are written whole, one per call, so every byte string the writer returns
can be sent as it is and a reader can start on it. The reader takes bytes in
any chunking and returns complete packets as soon as the page that ends them is
complete; it holds at most one page plus one packet in progress.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from gateway.audio import AudioFormatError

CAPTURE = b"OggS"
HEADER = struct.Struct("<4sBBqIIIB")  # capture, version, flags, granule, serial, sequence, crc, segments
FLAG_CONTINUED = 0x01
FLAG_BOS = 0x02
FLAG_EOS = 0x04
MAX_SEGMENTS = 255
MAX_PACKET_BYTES = 256 * 1024  # far above any Opus packet or header; a bigger one is not audio


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return tuple(table)


_CRC = _crc_table()


def crc32(data: bytes) -> int:
    """Ogg's CRC: polynomial 0x04C11DB7, not reflected, initial value 0."""
    crc = 0
    table = _CRC
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ byte]
    return crc


class OggWriter:
    """The pages of one logical stream, numbered in order."""

    def __init__(self, serial: int) -> None:
        self.serial = serial
        self._sequence = 0

    def page(self, packets: list[bytes], granule: int, *, bos: bool = False, eos: bool = False) -> bytes:
        """One page holding ``packets`` whole (they must fit in 255 lacing values)."""
        lacing = bytearray()
        for packet in packets:
            lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
        if len(lacing) > MAX_SEGMENTS:
            raise ValueError(f"{len(packets)} packets need {len(lacing)} lacing values; a page holds 255")
        flags = (FLAG_BOS if bos else 0) | (FLAG_EOS if eos else 0)
        header = HEADER.pack(CAPTURE, 0, flags, granule, self.serial, self._sequence, 0, len(lacing))
        page = bytearray(header + lacing + b"".join(packets))
        struct.pack_into("<I", page, 22, crc32(bytes(page)))
        self._sequence += 1
        return bytes(page)


@dataclass(frozen=True)
class OggPacket:
    serial: int
    data: bytes
    bos: bool  # the first packet of its logical stream
    granule: int  # the granule position of the page that ends it (-1: none)


class OggReader:
    """Turns an Ogg byte stream, cut anywhere, into packets. Raises
    ``AudioFormatError`` at the first byte that breaks the framing: the
    gateway does not resynchronise a live stream, it reports it."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._partial: dict[int, bytearray] = {}  # serial -> packet continued on the next page
        self._offset = 0  # bytes consumed so far, for messages

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer) + sum(len(p) for p in self._partial.values())

    def feed(self, data: bytes) -> Iterator[OggPacket]:
        self._buffer += data
        while True:
            page = self._next_page()
            if page is None:
                return
            yield from page

    def _next_page(self) -> list[OggPacket] | None:
        buf = self._buffer
        if len(buf) < min(HEADER.size, len(CAPTURE)):
            if bytes(buf) != CAPTURE[:len(buf)]:
                raise AudioFormatError(f"not an Ogg stream at byte {self._offset} (no 'OggS' page)")
            return None
        if buf[:4] != CAPTURE:
            raise AudioFormatError(f"not an Ogg stream at byte {self._offset} (no 'OggS' page)")
        if len(buf) < HEADER.size:
            return None
        _, version, flags, granule, serial, _, crc, segments = HEADER.unpack_from(buf)
        if version != 0:
            raise AudioFormatError(f"Ogg page at byte {self._offset} has version {version}; only 0 exists")
        if len(buf) < HEADER.size + segments:
            return None
        lacing = bytes(buf[HEADER.size:HEADER.size + segments])
        size = HEADER.size + segments + sum(lacing)
        if len(buf) < size:
            return None
        page = bytes(buf[:size])
        check = bytearray(page)
        check[22:26] = b"\0\0\0\0"
        if crc32(bytes(check)) != crc:
            raise AudioFormatError(f"Ogg page at byte {self._offset} fails its checksum (corrupt stream)")
        del self._buffer[:size]
        self._offset += size
        return self._packets(page, flags, granule, serial, lacing)

    def _packets(self, page: bytes, flags: int, granule: int, serial: int, lacing: bytes) -> list[OggPacket]:
        out: list[OggPacket] = []
        pos = HEADER.size + len(lacing)
        partial = self._partial.pop(serial, None)
        if partial is not None and not flags & FLAG_CONTINUED:
            partial = None  # the previous page's last packet was cut short: a lost page; start afresh
        current = partial if partial is not None else bytearray()
        bos = bool(flags & FLAG_BOS)
        ends = [i for i, value in enumerate(lacing) if value < 255]
        for i, value in enumerate(lacing):
            current += page[pos:pos + value]
            pos += value
            if len(current) > MAX_PACKET_BYTES:
                raise AudioFormatError(f"an Ogg packet larger than {MAX_PACKET_BYTES} bytes (not an audio stream)")
            if value < 255:
                out.append(OggPacket(serial, bytes(current), bos, granule if i == ends[-1] else -1))
                bos = False
                current = bytearray()
        if current:
            self._partial[serial] = current
        return out
