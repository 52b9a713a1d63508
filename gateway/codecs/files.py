"""Whole audio files (an upload to /v1/audio/transcriptions) -> mono float32
at the recognizer's rate, with the file's claims checked before they cost
anything.

The container is recognised from its first bytes and opened with that demuxer
only (FFmpeg's own probing would also try playlists and image formats), with
FFmpeg told the same (``format_whitelist``), to read little before the first
packet (``probesize``, ``analyzeduration``, ``max_streams``) and to open audio
decoders only (``codec_whitelist``): stream probing then never decodes a
picture or a video frame. Tags that are not UTF-8 are read with the bad bytes
dropped. An MP4/MOV/M4A file's sample tables are checked first
(gateway/codecs/mp4_tables.py), since FFmpeg sizes its index from them.

Then: the first audio stream is taken (a file with none says what it holds
instead); its codec must be one of ``ACCEPTED_DECODERS``; its declared rate
must be 8..48 kHz; a declared duration over the cap is refused before
decoding; while decoding, every frame's own rate is checked again and the
running duration is counted, so a header that lies is caught at the cap, not
after; and samples are resampled frame by frame, so no buffer is ever sized
from a header. WAV is read with no FFmpeg at all (gateway/audio.py).

The memory and CPU a decode may take are bounded by the process that runs it
(gateway/codecs/decode_worker.py); a ``MemoryError`` is left to it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.audio import AudioFormatError, AudioTooLong, StreamResampler, read_wav
from gateway.codecs.formats import check_source_rate
from gateway.codecs.mp4_tables import check_sample_tables
from gateway.codecs.pyav import ffmpeg_error, frame_to_mono, load_av

ACCEPTED = "WAV, FLAC, MP3, Ogg (Opus, Vorbis, FLAC), WebM, M4A/MP4 or AAC"
_NAMES = {"flac": "FLAC", "mp3": "MP3", "ogg": "Ogg", "matroska": "WebM/Matroska", "mov": "MP4/M4A", "aac": "AAC"}
PCM_DECODERS = tuple(f"pcm_{kind}" for kind in (
    "s8", "u8", "s16le", "s16be", "s24le", "s24be", "s32le", "s32be", "f32le", "f32be", "f64le", "f64be", "mulaw",
    "alaw"))
ACCEPTED_DECODERS = frozenset({"aac", "aac_fixed", "alac", "flac", "mp3float", "mp3", "mp2float", "mp2", "opus",
                               "libopus", "vorbis", "libvorbis", *PCM_DECODERS})
ACCEPTED_CODECS = "AAC, ALAC, FLAC, MP3, Opus, Vorbis or PCM"
# What FFmpeg may do while opening an upload: the sniffed demuxer only, audio decoders only (stream
# probing opens a decoder per stream), and little read ahead: audio headers say what they hold.
OPEN_OPTIONS = {"codec_whitelist": ",".join(sorted(ACCEPTED_DECODERS)), "probesize": str(256 * 1024),
                "analyzeduration": "1000000", "max_streams": "16"}
_MATROSKA_CODEC_ID = re.compile(rb"\x86[\x81-\xa0]A_")  # the CodecID element of an audio track, 1-byte size


@dataclass(frozen=True)
class DecodedFile:
    samples: np.ndarray  # mono float32 at the requested rate
    source_rate: int
    container: str  # "wav", or the FFmpeg demuxer used
    codec: str


def sniff(data: bytes) -> str | None:
    """The demuxer for ``data`` from its magic bytes, or None."""
    head = data[:12]
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "matroska"
    if head[4:8] == b"ftyp":
        return "mov"
    if head[:3] == b"ID3":
        return "mp3"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "aac" if (head[1] >> 1) & 0x03 == 0 else "mp3"  # layer 0 is ADTS; 1..3 are MPEG audio layers
    return None


def decode_file(data: bytes, out_rate: int, max_duration_s: float) -> DecodedFile:
    """Decode ``data`` to mono at ``out_rate``. Raises ``AudioTooLong`` past
    ``max_duration_s`` and ``AudioFormatError`` (saying why) for anything else.
    CPU-bound: call it off the event loop."""
    kind = sniff(data)
    if kind is None:
        raise AudioFormatError(f"not a recognised audio file (accepted: {ACCEPTED})")
    if kind == "wav":
        return _decode_wav(data, out_rate, max_duration_s)
    return _decode_av(data, kind, out_rate, max_duration_s)


def _too_long(seconds: float, max_duration_s: float) -> AudioTooLong:
    return AudioTooLong(f"audio of {seconds / 60:.1f} min; the limit is {max_duration_s / 60:g} min")


def _decode_wav(data: bytes, out_rate: int, max_duration_s: float) -> DecodedFile:
    samples, rate = read_wav(data, max_duration_s)  # rate and length checked before decoding
    resampler = StreamResampler(rate, out_rate)
    out = np.concatenate([resampler.feed(samples), resampler.flush()])
    return DecodedFile(out.astype(np.float32, copy=False), rate, "wav", "pcm")


def _decode_av(data: bytes, kind: str, out_rate: int, max_duration_s: float) -> DecodedFile:
    av = load_av()
    name = _NAMES[kind]
    if kind == "mov":
        check_sample_tables(data, max_duration_s)
    try:
        container = av.open(io.BytesIO(data), mode="r", format=kind, options={**OPEN_OPTIONS, "format_whitelist": kind},
                            metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise ffmpeg_error(exc, f"the file cannot be read as {name}") from None
    try:
        audio = list(container.streams.audio)
        if not audio:
            found = ", ".join(_describe(s) for s in container.streams) or "no streams"
            raise AudioFormatError(f"the file has no audio stream (found: {found})")
        stream = audio[0]
        codec = _accepted_codec(stream, data, kind, name)
        declared = int(stream.codec_context.sample_rate or 0)
        check_source_rate(declared, f"the {name} audio stream")
        length = _declared_seconds(container, stream)
        if length is not None and length > max_duration_s:
            raise _too_long(length, max_duration_s)
        samples = _decode_stream(av, container, stream, out_rate, max_duration_s, name)
    finally:
        container.close()
    if not len(samples):
        raise AudioFormatError(f"the {name} file holds no decodable audio")
    return DecodedFile(samples, declared, kind, codec)


def _accepted_codec(stream: Any, data: bytes, kind: str, name: str) -> str:
    """The decoder of ``stream``, when it is one uploads may use; else say which codec it is."""
    context = stream.codec_context
    if context is None:  # FFmpeg does not know the codec at all
        named = _matroska_codec_id(data) if kind == "matroska" else None
        codec = f"codec {named}" if named else "codec"
        raise AudioFormatError(f"the {name} audio stream's {codec} has no decoder here (accepted: {ACCEPTED_CODECS})")
    if context.name not in ACCEPTED_DECODERS:
        raise AudioFormatError(f"the {name} audio stream's codec {context.name} is not accepted "
                               f"(accepted: {ACCEPTED_CODECS})")
    return str(context.name)


def _matroska_codec_id(data: bytes) -> str | None:
    """The first audio CodecID in a Matroska file's track headers (its first 64 KiB), for a message."""
    found = _MATROSKA_CODEC_ID.search(data, 0, 64 * 1024)
    if found is None:
        return None
    start = found.start() + 2
    raw = data[start:start + (data[found.start() + 1] & 0x7F)]
    return raw.decode("ascii") if raw.isascii() and raw.decode("ascii").isprintable() else None


def _describe(stream: Any) -> str:
    context = getattr(stream, "codec_context", None)
    return f"{stream.type} {getattr(context, 'name', None) or 'of unknown codec'}"


def _declared_seconds(container: Any, stream: Any) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return float(container.duration) / 1_000_000  # AV_TIME_BASE
    return None


def _decode_stream(av: Any, container: Any, stream: Any, out_rate: int, max_duration_s: float,
                   name: str) -> np.ndarray:
    chunks: list[np.ndarray] = []
    resampler: StreamResampler | None = None
    seconds = 0.0
    try:
        for packet in container.demux(stream):
            for frame in packet.decode():
                rate = int(frame.sample_rate)
                check_source_rate(rate, f"a decoded {name} frame")
                seconds += frame.samples / rate
                if seconds > max_duration_s:
                    raise _too_long(seconds, max_duration_s)
                if resampler is None or resampler.in_rate != rate:
                    if resampler is not None:
                        chunks.append(resampler.flush())
                    resampler = StreamResampler(rate, out_rate)
                chunks.append(resampler.feed(frame_to_mono(frame)))
    except MemoryError:
        raise
    except av.FFmpegError as exc:
        raise ffmpeg_error(exc, f"the {name} file is corrupt or truncated") from None
    if resampler is not None:
        chunks.append(resampler.flush())
    return np.concatenate(chunks).astype(np.float32, copy=False) if chunks else np.zeros(0, dtype=np.float32)
