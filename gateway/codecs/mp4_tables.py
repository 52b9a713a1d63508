"""The sample tables of an MP4 / MOV / M4A file, checked before FFmpeg reads them.

FFmpeg's MP4 reader builds an index of every sample when it opens the file,
sized from the tables' counts (a PCM track: one entry per chunk and 1024 of
its samples), so a kilobyte that claims 2^30 samples per chunk costs
gigabytes before a byte of audio is read. This module walks the boxes itself
(moov/trak/mdia/minf/stbl, and moof/traf for fragments) and refuses, with the
reason:

- a table whose entry count cannot fit in the bytes of its box (stts, ctts,
  stsc, stsz, stz2, stco, co64, stss, trun);
- a track that declares more samples than an honest one holds within the
  duration cap: at most 48,000 a second for sound (one per PCM frame at the
  highest accepted rate), 240 a second for any other track (video frames,
  subtitles), counting stts, stsz, stsc times the chunk count, and fragment runs;
- a sound track whose time-to-sample table adds up to more than the cap
  (``AudioTooLong``);
- a compressed movie header (cmov), whose tables cannot be checked unpacked.

It reads headers only: the cost is one pass over at most ``MAX_BOXES`` box
headers, whatever the counts say.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from gateway.audio import AudioFormatError, AudioTooLong

MAX_BOXES = 100_000
MAX_DEPTH = 10
SOUND_SAMPLES_PER_S = 48_000
OTHER_SAMPLES_PER_S = 240
CONTAINERS = frozenset({b"moov", b"trak", b"mdia", b"minf", b"stbl", b"moof", b"traf", b"mvex", b"edts"})
# bytes per entry of each table whose entries are all the same size (after the version/flags word and count)
ENTRY_BYTES = {b"stts": 8, b"ctts": 8, b"stsc": 12, b"stco": 4, b"co64": 8, b"stss": 4}
TRUN_SAMPLE_FIELDS = (0x100, 0x200, 0x400, 0x800)  # duration, size, flags, composition offset: 4 bytes each


@dataclass
class Track:
    number: int  # 1-based, in file order
    track_id: int = 0
    handler: bytes = b""
    timescale: int = 0
    stts_samples: float = 0.0  # sums as floats: they are compared with a cap, and entries may overflow 64 bits
    stts_ticks: float = 0.0
    stsz_samples: int = 0
    chunks: int = 0
    chunk_runs: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=">u4"))  # first, per chunk, desc

    def chunk_samples(self) -> float:
        """Samples the sample-to-chunk runs add up to over the chunk offset table."""
        firsts = self.chunk_runs[:, 0].astype(np.float64)
        ends = np.append(firsts[1:], float(self.chunks + 1))
        return float(np.sum(np.maximum(ends - firsts, 0.0) * self.chunk_runs[:, 1].astype(np.float64)))


@dataclass
class Walk:
    tracks: list[Track] = field(default_factory=list)
    fragment_samples: dict[int, int] = field(default_factory=dict)  # by track ID
    fragment_track: int = 0  # the track ID of the traf being read
    boxes: int = 0


def check_sample_tables(data: bytes, max_duration_s: float) -> None:
    """Raise ``AudioFormatError`` (or ``AudioTooLong``) when ``data``'s tables claim
    more than an audio file within ``max_duration_s`` can hold; return otherwise."""
    walk = Walk()
    _walk(data, 0, len(data), 0, walk, None)
    limit = f"the {max_duration_s / 60:g} min limit"
    for track in walk.tracks:
        sound = track.handler == b"soun"
        per_s = SOUND_SAMPLES_PER_S if sound else OTHER_SAMPLES_PER_S
        declared = int(max(track.stts_samples, track.stsz_samples, track.chunk_samples(),
                           walk.fragment_samples.get(track.track_id, 0)))
        if declared > per_s * max_duration_s:
            kind = "sound" if sound else f"'{track.handler.decode('latin-1')}'"
            raise AudioFormatError(
                f"track {track.number} ({kind}) of the MP4 file declares {declared} samples; at most "
                f"{int(per_s * max_duration_s)} fit in {limit} ({per_s} a second)")
        if sound and track.timescale and track.stts_ticks / track.timescale > max_duration_s:
            seconds = track.stts_ticks / track.timescale
            raise AudioTooLong(f"audio of {seconds / 60:.1f} min; the limit is {max_duration_s / 60:g} min")
    known = {track.track_id for track in walk.tracks}
    for track_id, count in walk.fragment_samples.items():
        if track_id not in known and count > SOUND_SAMPLES_PER_S * max_duration_s:
            raise AudioFormatError(f"the MP4 file's fragments declare {count} samples; at most "
                                   f"{int(SOUND_SAMPLES_PER_S * max_duration_s)} fit in {limit}")


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of each box in ``data[start:end]``; a box
    that claims more than is left is cut at ``end`` (a truncated file)."""
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            if pos + 16 > end:
                return
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header:
            raise AudioFormatError(f"the MP4 file has a '{_name(kind)}' box of {size} bytes, shorter than its header")
        yield kind, pos + header, min(pos + size, end)
        pos += size


def _walk(data: bytes, start: int, end: int, depth: int, walk: Walk, track: Track | None) -> None:
    if depth > MAX_DEPTH:
        raise AudioFormatError(f"the MP4 file nests boxes more than {MAX_DEPTH} deep")
    for kind, body, body_end in _boxes(data, start, end):
        walk.boxes += 1
        if walk.boxes > MAX_BOXES:
            raise AudioFormatError(f"the MP4 file has more than {MAX_BOXES} boxes")
        if kind == b"cmov":
            raise AudioFormatError("the MP4 file's movie header is compressed (cmov), which is not accepted")
        if kind == b"trak":
            track = Track(number=len(walk.tracks) + 1)
            walk.tracks.append(track)
        if kind == b"traf":
            walk.fragment_track = 0
        if kind in CONTAINERS:
            _walk(data, body, body_end, depth + 1, walk, track)
        else:
            _read_leaf(kind, data[body:body_end], walk, track)


def _read_leaf(kind: bytes, body: bytes, walk: Walk, track: Track | None) -> None:
    if kind == b"tfhd" and len(body) >= 8:
        walk.fragment_track = _u32(body, 4)
    elif kind == b"trun":
        optional = (4 if _flags(body) & 0x1 else 0) + (4 if _flags(body) & 0x4 else 0)  # data offset, first flags
        count = _table_count(kind, body, _trun_entry_bytes(body), skip=optional)
        walk.fragment_samples[walk.fragment_track] = walk.fragment_samples.get(walk.fragment_track, 0) + count
    if track is None:
        return
    if kind == b"tkhd" and len(body) >= 24:
        track.track_id = _u32(body, 20 if body[0] == 1 else 12)
    elif kind == b"hdlr" and len(body) >= 12:
        track.handler = body[8:12]
    elif kind == b"mdhd" and len(body) >= 24:
        track.timescale = _u32(body, 20 if body[0] == 1 else 12)
    elif kind in ENTRY_BYTES:
        count = _table_count(kind, body, ENTRY_BYTES[kind])
        _read_table(kind, body, count, track)
    elif kind == b"stsz" and len(body) >= 12:
        sample_size, count = _u32(body, 4), _u32(body, 8)
        if sample_size == 0:
            _table_count(kind, body, 4, 8)
        track.stsz_samples = count
    elif kind == b"stz2" and len(body) >= 12:
        bits, count = body[7], _u32(body, 8)
        _check_fits(kind, count, (count * bits + 7) // 8, len(body) - 12)
        track.stsz_samples = count


def _read_table(kind: bytes, body: bytes, count: int, track: Track) -> None:
    if kind == b"stts":
        entries = np.frombuffer(body, dtype=">u4", count=2 * count, offset=8).reshape(-1, 2).astype(np.float64)
        track.stts_samples = float(entries[:, 0].sum())
        track.stts_ticks = float((entries[:, 0] * entries[:, 1]).sum())
    elif kind == b"stsc":
        track.chunk_runs = np.frombuffer(body, dtype=">u4", count=3 * count, offset=8).reshape(-1, 3)
    elif kind in (b"stco", b"co64"):
        track.chunks = count


def _table_count(kind: bytes, body: bytes, entry_bytes: int, count_at: int = 4, skip: int = 0) -> int:
    """The entry count of a table box (at ``count_at``; the entries start ``skip``
    bytes after it), checked against the bytes that follow."""
    if len(body) < count_at + 4 + skip:
        raise AudioFormatError(f"the MP4 file's '{_name(kind)}' table is cut short")
    count = _u32(body, count_at)
    _check_fits(kind, count, count * entry_bytes, len(body) - count_at - 4 - skip)
    return count


def _check_fits(kind: bytes, count: int, needed: int, available: int) -> None:
    if needed > available:
        raise AudioFormatError(f"the MP4 file's '{_name(kind)}' table claims {count} entries ({needed} bytes) "
                               f"in {available} bytes")


def _trun_entry_bytes(body: bytes) -> int:
    flags = _flags(body)
    return 4 * sum(1 for bit in TRUN_SAMPLE_FIELDS if flags & bit)


def _flags(body: bytes) -> int:
    return _u32(body, 0) & 0xFFFFFF if len(body) >= 4 else 0


def _u32(body: bytes, at: int) -> int:
    return int(struct.unpack_from(">I", body, at)[0])


def _name(kind: bytes) -> str:
    return kind.decode("latin-1").encode("ascii", "backslashreplace").decode()
