"""A streaming WebM/Matroska demuxer for one audio track, push-driven.

MediaRecorder writes a live WebM: a Segment and Clusters of unknown size,
blocks appended as they are encoded. This reader takes that byte stream cut
anywhere and yields each audio block's frames as soon as the block's last byte
arrives; it never holds more than one element in progress.

Matroska's element IDs are unique across levels, so the reader walks the
stream flat: it steps into a Segment or a Cluster (whatever their sizes say)
and treats every other element on its own: the EBML header and Tracks are read
and checked, blocks are returned, everything else is skipped unread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from gateway.audio import AudioFormatError

EBML = 0x1A45DFA3
DOC_TYPE = 0x4282
SEGMENT = 0x18538067
CLUSTER = 0x1F43B675
TRACKS = 0x1654AE6B
TRACK_ENTRY = 0xAE
TRACK_NUMBER = 0xD7
TRACK_TYPE = 0x83
CODEC_ID = 0x86
CODEC_PRIVATE = 0x63A2
AUDIO = 0xE1
CHANNELS = 0x9F
SAMPLING_FREQUENCY = 0xB5
SIMPLE_BLOCK = 0xA3
BLOCK_GROUP = 0xA0
BLOCK = 0xA1
TRACK_TYPE_AUDIO = 2
TRACK_KINDS = {1: "video", 2: "audio", 3: "complex", 0x10: "logo", 0x11: "subtitle", 0x12: "buttons", 0x20: "control"}

UNKNOWN_SIZE = -1
MAX_ELEMENT_BYTES = 1024 * 1024  # an element read whole (header, tracks, block); more is not an audio stream
_EBML_ID = EBML.to_bytes(4, "big")
_TRANSPARENT = (SEGMENT, CLUSTER)
_READ_WHOLE = (EBML, TRACKS, SIMPLE_BLOCK, BLOCK_GROUP)


def read_vint(data: bytes | bytearray, pos: int, *, keep_marker: bool) -> tuple[int, int] | None:
    """An EBML variable-length integer at ``pos``: (value, length), or None if
    ``data`` ends first. Sizes drop the length marker; IDs keep it. An
    all-ones size is ``UNKNOWN_SIZE``."""
    if pos >= len(data):
        return None
    first = data[pos]
    if first == 0:
        raise AudioFormatError("malformed WebM: an EBML number longer than 8 bytes")
    length = 9 - first.bit_length()
    if pos + length > len(data):
        return None
    value = int.from_bytes(data[pos:pos + length], "big")
    if keep_marker:
        return value, length
    value &= (1 << (7 * length)) - 1
    if value == (1 << (7 * length)) - 1:
        return UNKNOWN_SIZE, length
    return value, length


def children(body: bytes) -> Iterator[tuple[int, bytes]]:
    """The (id, body) pairs of a master element read whole."""
    pos = 0
    while pos < len(body):
        ident = read_vint(body, pos, keep_marker=True)
        size = read_vint(body, pos + ident[1], keep_marker=False) if ident else None
        if ident is None or size is None or size[0] == UNKNOWN_SIZE:
            raise AudioFormatError("malformed WebM: a truncated or unsized element inside a header")
        start = pos + ident[1] + size[1]
        end = start + size[0]
        if end > len(body):
            raise AudioFormatError("malformed WebM: an element runs past its parent")
        yield ident[0], body[start:end]
        pos = end


def _uint(body: bytes) -> int:
    return int.from_bytes(body, "big") if body else 0


@dataclass(frozen=True)
class AudioTrack:
    number: int
    codec: str  # the Matroska codec id, e.g. "A_OPUS"
    codec_private: bytes
    channels: int
    sample_rate: float


def parse_tracks(body: bytes) -> tuple[AudioTrack | None, list[str]]:
    """The first audio track of a Tracks element, and a description of every track."""
    found: AudioTrack | None = None
    seen: list[str] = []
    for ident, entry in children(body):
        if ident != TRACK_ENTRY:
            continue
        fields = dict(children(entry))
        kind = _uint(fields.get(TRACK_TYPE, b""))
        codec = fields.get(CODEC_ID, b"").decode("ascii", "replace").rstrip("\0")
        seen.append(f"{TRACK_KINDS.get(kind, 'unknown')} {codec or '(no codec)'}")
        if kind != TRACK_TYPE_AUDIO or found is not None:
            continue
        audio = dict(children(fields.get(AUDIO, b"")))
        rate_raw = audio.get(SAMPLING_FREQUENCY, b"")
        rate = struct.unpack(">f" if len(rate_raw) == 4 else ">d", rate_raw)[0] if len(rate_raw) in (4, 8) else 8000.0
        found = AudioTrack(number=_uint(fields.get(TRACK_NUMBER, b"")), codec=codec,
                           codec_private=fields.get(CODEC_PRIVATE, b""),
                           channels=_uint(audio.get(CHANNELS, b"\x01")), sample_rate=rate)
    return found, seen


def block_frames(body: bytes) -> tuple[int, list[bytes]]:
    """(track number, frames) of a Block or SimpleBlock, with its lacing undone."""
    track = read_vint(body, 0, keep_marker=False)
    if track is None or len(body) < track[1] + 3:
        raise AudioFormatError("malformed WebM: a block shorter than its header")
    pos = track[1] + 2  # the 16-bit relative timecode is not needed: blocks arrive in order
    lacing = (body[pos] >> 1) & 0x03
    pos += 1
    if lacing == 0:
        return track[0], [body[pos:]]
    if pos >= len(body):
        raise AudioFormatError("malformed WebM: a laced block without its frame count")
    count = body[pos] + 1
    pos += 1
    sizes: list[int] = []
    if lacing == 1:  # Xiph: each size a run of 255s and a final byte
        for _ in range(count - 1):
            size = 0
            while True:
                if pos >= len(body):
                    raise AudioFormatError("malformed WebM: truncated Xiph lacing")
                size += body[pos]
                pos += 1
                if body[pos - 1] != 255:
                    break
            sizes.append(size)
    elif lacing == 3:  # EBML: the first size, then signed differences
        first = read_vint(body, pos, keep_marker=False)
        if first is None or first[0] == UNKNOWN_SIZE:
            raise AudioFormatError("malformed WebM: truncated EBML lacing")
        sizes.append(first[0])
        pos += first[1]
        for _ in range(count - 2):
            diff = read_vint(body, pos, keep_marker=False)
            if diff is None or diff[0] == UNKNOWN_SIZE:
                raise AudioFormatError("malformed WebM: truncated EBML lacing")
            sizes.append(sizes[-1] + diff[0] - ((1 << (7 * diff[1] - 1)) - 1))
            pos += diff[1]
    else:  # fixed: equal sizes
        if (len(body) - pos) % count:
            raise AudioFormatError("malformed WebM: fixed lacing that does not divide the block")
        sizes = [(len(body) - pos) // count] * (count - 1)
    last = len(body) - pos - sum(sizes)
    if last < 0 or any(size < 0 for size in sizes):
        raise AudioFormatError("malformed WebM: lace sizes larger than the block")
    frames = []
    for size in [*sizes, last]:
        frames.append(body[pos:pos + size])
        pos += size
    return track[0], frames


class WebmReader:
    """Yields the Tracks' audio track once, then the frames of that track's blocks."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skip = 0  # bytes of a skipped element still to come
        self._offset = 0
        self.track: AudioTrack | None = None
        self._seen_header = False

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer) + self._skip

    @property
    def consumed_bytes(self) -> int:
        """How far into the stream the reader has read: the end of its last whole element."""
        return self._offset

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an element read whole (at most ``MAX_ELEMENT_BYTES`` and its header)."""
        return len(self._buffer)

    @property
    def in_element(self) -> bool:
        """Part of an element read whole is buffered (a skipped one's tail does not count)."""
        return bool(self._buffer)

    def feed(self, data: bytes) -> Iterator[AudioTrack | bytes]:
        """The audio track (when Tracks is read) and each audio frame, in order."""
        if self._skip:
            taken = min(self._skip, len(data))
            self._skip -= taken
            self._offset += taken
            data = data[taken:]
        self._buffer += data
        while self._buffer and not self._skip:
            element = self._next_element()
            if element is None:
                return
            yield from element

    def _next_element(self) -> list[AudioTrack | bytes] | None:
        buf = self._buffer
        if not self._seen_header and bytes(buf[:4]) != _EBML_ID[:len(buf)]:
            raise AudioFormatError("not a WebM stream (no EBML header at its start)")
        ident = read_vint(buf, 0, keep_marker=True)
        if ident is None:
            return None
        size = read_vint(buf, ident[1], keep_marker=False)
        if size is None:
            return None
        head = ident[1] + size[1]
        if ident[0] in _TRANSPARENT:
            self._consume(head)
            return []
        if size[0] == UNKNOWN_SIZE:
            raise AudioFormatError(f"malformed WebM: element 0x{ident[0]:X} at byte {self._offset} has no size")
        if ident[0] not in _READ_WHOLE:
            taken = min(len(buf), head + size[0])
            self._skip = head + size[0] - taken
            self._consume(taken)
            return []
        if size[0] > MAX_ELEMENT_BYTES:
            raise AudioFormatError(f"WebM element 0x{ident[0]:X} of {size[0]} bytes; the limit is "
                                   f"{MAX_ELEMENT_BYTES} (not an audio stream)")
        if len(buf) < head + size[0]:
            return None
        body = bytes(buf[head:head + size[0]])
        self._consume(head + size[0])
        return self._element(ident[0], body)

    def _consume(self, count: int) -> None:
        del self._buffer[:count]
        self._offset += count

    def _element(self, ident: int, body: bytes) -> list[AudioTrack | bytes]:
        if ident == EBML:
            doc_type = dict(children(body)).get(DOC_TYPE, b"").rstrip(b"\0")
            if doc_type not in (b"webm", b"matroska"):
                raise AudioFormatError(f"not a WebM stream (EBML document type {doc_type[:20]!r})")
            self._seen_header = True
            return []
        if ident == TRACKS:
            track, seen = parse_tracks(body)
            if track is None:
                raise AudioFormatError(f"the stream has no audio track (found: {', '.join(seen) or 'no tracks'})")
            self.track = track
            return [track]
        if self.track is None:
            raise AudioFormatError("malformed WebM: a block before the Tracks element")
        if ident == BLOCK_GROUP:
            body = dict(children(body)).get(BLOCK, b"")
            if not body:
                return []
        number, frames = block_frames(body)
        return list(frames) if number == self.track.number else []
