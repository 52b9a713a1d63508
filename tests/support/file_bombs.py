"""Hostile upload files, built at test time: each is small on the wire and
asks whatever decodes it for far more memory or CPU than its bytes justify,
or trips a decoder's error path.

- ``sample_table_bomb``: an M4A whose PCM track says each of its chunks holds
  2^30 samples; FFmpeg's MP4 reader sizes an index from that before it reads a
  byte of audio (about 24 bytes per 1024 samples: 1.5 GB for 64 chunks).
- ``png_track_bomb``: a MOV with a real AAC track and a second track holding
  one 16000x16000 RGB PNG (768 MB decoded) in under a megabyte of deflate.
- ``mp3_with_binary_tag``: an MP3 whose ID3v2 title claims UTF-8 and is not.
- ``webm_unknown_codec``: a WebM whose audio track names a codec no decoder knows.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import resource
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import av

from tests.support.media import ffmpeg_file, tone

# ---- MP4 / QuickTime boxes


def box(kind: bytes, *children: bytes) -> bytes:
    body = b"".join(children)
    return struct.pack(">I", 8 + len(body)) + kind + body


def full_box(kind: bytes, version: int, payload: bytes, flags: int = 0) -> bytes:
    return box(kind, struct.pack(">I", version << 24 | flags), payload)


def pcm_track(*, timescale: int, stts: list[tuple[int, int]], stsc: list[tuple[int, int]], sample_size: int,
              sample_count: int, chunk_offsets: list[int], handler: bytes = b"soun") -> bytes:
    """One QuickTime track of 16-bit mono PCM ('twos') with the tables given as
    they are, whether or not they agree with each other."""
    entry = (b"\0" * 6 + struct.pack(">H", 1) + struct.pack(">HHI", 0, 0, 0) +  # reserved, data ref; v0 sound
             struct.pack(">HHHHI", 1, 16, 0, 0, timescale << 16))  # channels, bits, compression, packet, rate
    stsd = full_box(b"stsd", 0, struct.pack(">I", 1) + box(b"twos", entry))
    tables = box(
        b"stbl", stsd,
        full_box(b"stts", 0, struct.pack(">I", len(stts)) + b"".join(struct.pack(">II", *e) for e in stts)),
        full_box(b"stsc", 0, struct.pack(">I", len(stsc)) +
                 b"".join(struct.pack(">III", first, per_chunk, 1) for first, per_chunk in stsc)),
        full_box(b"stsz", 0, struct.pack(">II", sample_size, sample_count)),
        full_box(b"stco", 0, struct.pack(">I", len(chunk_offsets)) + b"".join(struct.pack(">I", o) for o in chunk_offsets)),
    )
    media_header = full_box(b"mdhd", 0, struct.pack(">IIIIHH", 0, 0, timescale, sample_count, 0x55C4, 0))
    handler_box = full_box(b"hdlr", 0, struct.pack(">I4s12s", 0, handler, b"\0" * 12) + b"\0")
    dref = full_box(b"dref", 0, struct.pack(">I", 1) + full_box(b"url ", 0, b"", flags=1))  # data in this file
    media_info = box(b"minf", full_box(b"smhd", 0, b"\0" * 4), box(b"dinf", dref), tables)
    track_header = full_box(b"tkhd", 0, struct.pack(">IIIII", 0, 0, 1, 0, sample_count) + b"\0" * 60)
    return box(b"trak", track_header, box(b"mdia", media_header, handler_box, media_info))


def m4a(track: bytes, mdat: bytes = b"\0" * 64) -> bytes:
    ftyp = box(b"ftyp", b"M4A ", struct.pack(">I", 0), b"M4A mp42isom")
    movie_header = full_box(b"mvhd", 0, struct.pack(">IIII", 0, 0, 1000, 0) + b"\0" * 80)
    return ftyp + box(b"moov", movie_header, track) + box(b"mdat", mdat)


def sample_table_bomb(chunks: int = 64, per_chunk: int = 1 << 30) -> bytes:
    """An M4A of ~1 KB whose one PCM track declares ``chunks`` chunks of
    ``per_chunk`` samples each (stsc), every chunk pointing into a 64-byte mdat."""
    track = pcm_track(timescale=16000, stts=[(32, 1)], stsc=[(1, per_chunk)], sample_size=2, sample_count=32,
                      chunk_offsets=[0] * chunks)
    return m4a(track)


def honest_pcm_m4a(seconds: float = 1.0, rate: int = 16000) -> bytes:
    """The same hand-made layout with tables that tell the truth (one chunk, ``seconds`` of a tone)."""
    samples = (tone(seconds, rate) * 32767).astype(">i2").tobytes()
    count = len(samples) // 2
    probe = m4a(pcm_track(timescale=rate, stts=[(count, 1)], stsc=[(1, count)], sample_size=2, sample_count=count,
                          chunk_offsets=[0]), samples)
    offset = len(probe) - len(samples)  # the mdat payload is last
    return m4a(pcm_track(timescale=rate, stts=[(count, 1)], stsc=[(1, count)], sample_size=2, sample_count=count,
                         chunk_offsets=[offset]), samples)


# ---- a MOV whose second track is one huge PNG


def huge_png(width: int = 16000, height: int = 16000) -> bytes:
    """An all-black 8-bit RGB PNG of ``width`` x ``height``, deflated row by row
    so building it never holds the raw image."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    deflate = zlib.compressobj(9)
    row = b"\0" * (1 + 3 * width)  # filter byte 0, then black pixels
    parts = [deflate.compress(row) for _ in range(height)]
    parts.append(deflate.flush())
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", b"".join(parts)) + chunk(b"IEND", b"")


def _mux_aac(out: av.container.OutputContainer, audio: av.stream.Stream, seconds: float) -> None:
    samples = tone(seconds, 16000)
    for start in range(0, len(samples), 1024):
        frame = av.AudioFrame.from_ndarray(samples[start:start + 1024].reshape(1, -1), format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 16000, start
        for packet in audio.encode(frame):
            out.mux(packet)
    for packet in audio.encode(None):
        out.mux(packet)


def fragmented_mp4(seconds: float) -> bytes:
    """AAC in a fragmented MP4 (empty moov, then moof/mdat pairs), as streaming muxers write it."""
    buf = io.BytesIO()
    out = av.open(buf, "w", format="mp4", options={"movflags": "frag_keyframe+empty_moov",
                                                  "frag_duration": "500000"})
    audio = out.add_stream("aac", rate=16000)
    audio.layout = "mono"
    _mux_aac(out, audio, seconds)
    out.close()
    return buf.getvalue()


@functools.lru_cache(maxsize=1)
def png_track_bomb(side: int = 16000) -> bytes:
    """A MOV holding 2 s of AAC and, as a second track, one ``side`` x ``side`` PNG frame."""
    buf = io.BytesIO()
    out = av.open(buf, "w", format="mov")
    audio = out.add_stream("aac", rate=16000)
    audio.layout = "mono"
    video = out.add_stream("png", rate=1)
    video.width = video.height = side
    video.pix_fmt = "rgb24"
    _mux_aac(out, audio, 2.0)
    picture = av.Packet(huge_png(side, side))
    picture.stream, picture.pts, picture.dts, picture.time_base = video, 0, 0, video.time_base
    picture.is_keyframe = True
    out.mux(picture)
    out.close()
    return buf.getvalue()


# ---- tags and codec names that trip decoders


def id3v2_title(raw_title: bytes, encoding: int = 3) -> bytes:
    """An ID3v2.4 tag with one TIT2 frame whose text is ``raw_title`` under
    text encoding ``encoding`` (3: UTF-8), the bytes as given."""
    def synchsafe(n: int) -> bytes:
        return bytes([(n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F])

    body = bytes([encoding]) + raw_title + b"\0"
    frame = b"TIT2" + synchsafe(len(body)) + b"\0\0" + body
    return b"ID3\x04\0\0" + synchsafe(len(frame)) + frame


def mp3_with_binary_tag(seconds: float = 1.0) -> bytes:
    """An MP3 from FFmpeg (no tag of its own) behind an ID3v2 title of bytes that are not UTF-8."""
    audio = ffmpeg_file("mp3", "libmp3lame", tone(seconds, 16000), 16000, options={})
    if audio[:3] == b"ID3":  # drop the muxer's own tag so ours is the one FFmpeg reads
        size = sum((b & 0x7F) << (7 * (3 - i)) for i, b in enumerate(audio[6:10]))
        audio = audio[10 + size:]
    return id3v2_title(b"caf\xe9 \xff\xfe") + audio


def webm_unknown_codec(seconds: float = 1.0, codec_id: bytes = b"A_FOOB") -> bytes:
    """A WebM from FFmpeg's muxer with its Opus track's CodecID (``A_OPUS``)
    replaced by ``codec_id`` of the same length, so every size stays right."""
    data = ffmpeg_file("webm", "libopus", tone(seconds, 48000), 48000)
    element = b"\x86\x86A_OPUS"  # CodecID, size 6
    assert len(codec_id) == 6 and data.count(element) == 1
    return data.replace(element, b"\x86\x86" + codec_id)


# ---- what a decode costs, measured in a process of its own, and a cap for this one


@contextlib.contextmanager
def address_space_cap(extra_bytes: int) -> Iterator[None]:
    """Cap this process's address space (the soft limit) at its present size plus
    ``extra_bytes`` while the block runs, so code that would allocate gigabytes
    fails here instead of sinking the machine; the limit is restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm", encoding="ascii") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = mapped + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


_DECODE_IN_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from tests.support import file_bombs
from gateway.codecs.files import decode_file
data = getattr(file_bombs, {bomb!r})()
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    decode_file(data, 16000, 900.0)
    outcome = "decoded"
except Exception as exc:
    outcome = type(exc).__name__
print(outcome, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def decode_in_capped_child(bomb: str, cap_bytes: int = 4 << 30) -> tuple[str, int]:
    """Build ``bomb`` (a function of this module) in a fresh Python process, cap
    its address space at ``cap_bytes`` (so a runaway decode cannot sink the
    machine), decode it in-process there with ``decode_file``; the outcome
    (``decoded`` or the exception's class name) and by how many MB the peak
    resident memory grew during the decode."""
    root = str(Path(__file__).resolve().parents[2])
    result = subprocess.run([sys.executable, "-c", _DECODE_IN_CHILD.format(root=root, bomb=bomb, cap=cap_bytes)],
                            capture_output=True, text=True, timeout=300, check=True)
    outcome, grown_mb = result.stdout.split()
    return outcome, int(grown_mb)
