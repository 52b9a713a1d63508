"""Ogg framing (RFC 3533): a page writer and a streaming page reader.

Pages are written whole, one per call, so every byte string the writer returns
can be sent as it is and a reader can start on it. The reader takes bytes in
any chunking and returns complete packets of the stream it is told to read as
soon as the page that ends them is complete; it holds at most one page plus one
packet of that stream in progress, and checks each page's CRC in C (zlib).
"""

from __future__ import annotations

import struct
import zlib
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
MAX_LOGICAL_STREAMS = 8  # begun and not ended at once: audio, perhaps video, a skeleton, a chained link


# Ogg's CRC is CRC-32 with polynomial 0x04C11DB7, not reflected, initial value 0 and
# no final inversion. zlib's CRC-32 is the same polynomial reflected: fed the bytes
# bit-reversed, with its initial and final inversions undone, it gives the Ogg CRC
# bit-reversed, computed in C.
_REVERSED_BITS = bytes(int(f"{byte:08b}"[::-1], 2) for byte in range(256))


def crc32(data: bytes) -> int:
    """Ogg's CRC: polynomial 0x04C11DB7, not reflected, initial value 0."""
    reflected = zlib.crc32(data.translate(_REVERSED_BITS), 0xFFFFFFFF) ^ 0xFFFFFFFF
    return int(f"{reflected:032b}"[::-1], 2)


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
    skipped: bool = False  # stands for a data page of a stream not selected; ``data`` is empty


class OggReader:
    """Turns an Ogg byte stream, cut anywhere, into packets. Raises
    ``AudioFormatError`` at the first byte that breaks the framing: the
    gateway does not resynchronise a live stream, it reports it.

    Only the selected logical stream (the first to begin, or the one given to
    ``select``) is read into packets; of any other stream the reader gives the
    first packet of its beginning-of-stream page (its identification header)
    and, for each data page, one ``skipped`` marker. Between calls it holds at
    most the bytes not yet making a whole page plus one packet of the selected
    stream in progress, and it accepts at most ``MAX_LOGICAL_STREAMS`` streams
    begun and not yet ended."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._selected: int | None = None
        self._partial = bytearray()  # the selected stream's packet continued on its next page
        self._open: set[int] = set()  # serials of streams begun (BOS) and not ended (EOS)
        self._offset = 0  # bytes consumed so far, for messages

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer) + len(self._partial)

    @property
    def consumed_bytes(self) -> int:
        """How far into the stream the reader has read: the end of its last whole page."""
        return self._offset

    def select(self, serial: int) -> None:
        """Read ``serial``'s packets from the next page on; a stream selected
        before counts as ended (a chained stream need not end with EOS)."""
        if self._selected is not None and self._selected != serial:
            self._open.discard(self._selected)
        self._selected = serial
        self._partial = bytearray()

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
        packets = self._page_packets(page, flags, granule, serial, lacing)
        self._offset += size
        return packets

    def _page_packets(self, page: bytes, flags: int, granule: int, serial: int, lacing: bytes) -> list[OggPacket]:
        if flags & FLAG_BOS:
            self._begin(serial)
        if flags & FLAG_EOS:
            self._open.discard(serial)
        if serial == self._selected:
            return self._packets(page, flags, granule, serial, lacing)
        if flags & FLAG_BOS:  # its identification header: what the stream is; the rest is not kept
            start = HEADER.size + len(lacing)
            length = next((i for i, value in enumerate(lacing) if value < 255), len(lacing) - 1) + 1
            return [OggPacket(serial, page[start:start + sum(lacing[:length])], True, granule)]
        return [OggPacket(serial, b"", False, granule, skipped=True)]

    def _begin(self, serial: int) -> None:
        self._open.add(serial)
        if len(self._open) > MAX_LOGICAL_STREAMS:
            raise AudioFormatError(f"Ogg page at byte {self._offset} begins a logical stream while "
                                   f"{MAX_LOGICAL_STREAMS} are open; at most {MAX_LOGICAL_STREAMS} are accepted")
        if self._selected is None:
            self._selected = serial
        elif serial == self._selected:
            self._partial = bytearray()  # a new stream reusing the serial

    def _packets(self, page: bytes, flags: int, granule: int, serial: int, lacing: bytes) -> list[OggPacket]:
        out: list[OggPacket] = []
        pos = HEADER.size + len(lacing)
        current = self._partial
        if current and not flags & FLAG_CONTINUED:
            current = bytearray()  # the previous page's last packet was cut short: a lost page; start afresh
        self._partial = bytearray()
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
        self._partial = current
        return out
