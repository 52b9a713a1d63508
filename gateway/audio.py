"""PCM on the wire: decoding, encoding, streaming resampling and WAV framing.

All audio inside the gateway is mono float32 in [-1, 1]. The wire carries raw
little-endian PCM (``pcm_s16le`` or ``pcm_f32le``); a message may end in the
middle of a sample, so decoders keep the partial sample for the next message.
"""

from __future__ import annotations

import enum
import struct

import numpy as np
import soxr

MIN_RATE = 8000
MAX_RATE = 48000


class Encoding(str, enum.Enum):
    S16LE = "pcm_s16le"
    F32LE = "pcm_f32le"

    @property
    def sample_bytes(self) -> int:
        return 2 if self is Encoding.S16LE else 4


class AudioFormatError(ValueError):
    """A WAV or PCM payload that cannot be used; the message says why."""


class AudioTooLong(AudioFormatError):
    """Audio past a duration cap; the message gives the cap."""


def parse_encoding(raw: str) -> Encoding:
    try:
        return Encoding(raw)
    except ValueError:
        raise ValueError(f"must be one of: {', '.join(e.value for e in Encoding)}") from None


def parse_rate(raw: str | int) -> int:
    try:
        rate = int(raw)
    except (TypeError, ValueError):
        raise ValueError("is not an integer") from None
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"must be between {MIN_RATE} and {MAX_RATE}")
    return rate


class PcmDecoder:
    """Turns a stream of byte messages into float32 samples, keeping partial samples."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding = encoding
        self._pending = b""

    def feed(self, data: bytes) -> np.ndarray:
        data = self._pending + data
        width = self.encoding.sample_bytes
        usable = len(data) - len(data) % width
        self._pending = data[usable:]
        return decode(data[:usable], self.encoding)

    @property
    def pending_bytes(self) -> int:
        return len(self._pending)


def decode(data: bytes, encoding: Encoding) -> np.ndarray:
    if encoding is Encoding.S16LE:
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    samples = np.frombuffer(data, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(samples)):
        raise AudioFormatError("pcm_f32le audio contains NaN or infinite samples")
    return samples


def encode(samples: np.ndarray, encoding: Encoding) -> bytes:
    samples = np.asarray(samples, dtype=np.float32)
    if encoding is Encoding.S16LE:
        return bytes((np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes())
    return bytes(samples.astype("<f4").tobytes())


class StreamResampler:
    """Resamples a stream chunk by chunk with no discontinuity at chunk boundaries.

    soxr keeps its filter state between calls, so concatenated outputs equal one
    resampling of the concatenated input (up to the filter's delay, flushed at the end).
    """

    def __init__(self, in_rate: int, out_rate: int, quality: str = "HQ") -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream = None if in_rate == out_rate else soxr.ResampleStream(
            in_rate, out_rate, 1, dtype="float32", quality=quality)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, dtype=np.float32)
        if self._stream is None:
            return samples
        out: np.ndarray = self._stream.resample_chunk(samples, last=False)
        return out

    def flush(self) -> np.ndarray:
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        out: np.ndarray = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        return out


def resample(samples: np.ndarray, in_rate: int, out_rate: int) -> np.ndarray:
    if in_rate == out_rate:
        return np.asarray(samples, dtype=np.float32)
    out: np.ndarray = soxr.resample(np.asarray(samples, dtype=np.float32), in_rate, out_rate)
    return out.astype(np.float32)


# ---- WAV

_STREAMING_SIZE = 0xFFFFFFFF  # "unknown length": accepted by browsers, ffmpeg, sox


def wav_header(sample_rate: int, encoding: Encoding = Encoding.S16LE, n_samples: int | None = None) -> bytes:
    """A 44-byte RIFF/WAVE header. ``n_samples=None`` writes the streaming form."""
    width = encoding.sample_bytes
    fmt_tag = 1 if encoding is Encoding.S16LE else 3
    data_size = _STREAMING_SIZE if n_samples is None else n_samples * width
    riff_size = _STREAMING_SIZE if n_samples is None else 36 + data_size
    return (b"RIFF" + struct.pack("<I", riff_size) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, fmt_tag, 1, sample_rate, sample_rate * width, width, width * 8)
            + b"data" + struct.pack("<I", data_size))


def write_wav(samples: np.ndarray, sample_rate: int, encoding: Encoding = Encoding.S16LE) -> bytes:
    return wav_header(sample_rate, encoding, len(samples)) + encode(samples, encoding)


def read_wav(data: bytes, max_duration_s: float | None = None) -> tuple[np.ndarray, int]:
    """Parse a RIFF/WAVE file: PCM 8/16/24/32-bit or float32/64, any channel count.

    Returns mono float32 samples (channels averaged) and the sample rate. The
    header's claims are checked before they cost anything: the rate must be
    8..48 kHz (a 1 Hz header would make a resampler's output thousands of
    times the file), and a file longer than ``max_duration_s`` raises
    ``AudioTooLong`` before a sample is decoded. Every buffer is then sized by
    the bytes actually present, never by a header field.
    """
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioFormatError("not a WAV file (no RIFF/WAVE header)")
    pos, fmt, payload = 12, None, None
    while pos + 8 <= len(data):
        chunk_id, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if chunk_id == b"fmt ":
            if len(body) < 16:
                raise AudioFormatError("WAV fmt chunk is truncated")
            fmt = struct.unpack("<HHIIHH", body[:16])
            if fmt[0] == 0xFFFE and len(body) >= 26:  # WAVE_FORMAT_EXTENSIBLE: real tag in the GUID
                fmt = (struct.unpack("<H", body[24:26])[0], *fmt[1:])
        elif chunk_id == b"data":
            payload = body  # a streaming header's size runs past the end: take what is there
            break
        pos += 8 + size + (size & 1)
    if fmt is None:
        raise AudioFormatError("WAV file has no fmt chunk")
    if payload is None:
        raise AudioFormatError("WAV file has no data chunk")
    tag, channels, rate, _, _, bits = fmt
    if channels < 1:
        raise AudioFormatError("WAV file declares 0 channels")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioFormatError(f"the WAV file has a sample rate of {rate} Hz; accepted: {MIN_RATE} to {MAX_RATE} Hz")
    width = bits // 8
    frame = width * channels
    payload = payload[: len(payload) - len(payload) % frame] if frame else b""
    if max_duration_s is not None and frame and len(payload) // frame > max_duration_s * rate:
        seconds = len(payload) // frame / rate
        raise AudioTooLong(f"audio of {seconds / 60:.1f} min; the limit is {max_duration_s / 60:g} min")
    if tag == 1 and bits == 8:
        samples = (np.frombuffer(payload, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif tag == 1 and bits == 16:
        samples = np.frombuffer(payload, dtype="<i2").astype(np.float32) / 32768.0
    elif tag == 1 and bits == 24:
        raw = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
        samples = ints.astype(np.float32) / float(1 << 23)
    elif tag == 1 and bits == 32:
        samples = np.frombuffer(payload, dtype="<i4").astype(np.float32) / float(1 << 31)
    elif tag == 3 and bits == 32:
        samples = np.frombuffer(payload, dtype="<f4").astype(np.float32)
    elif tag == 3 and bits == 64:
        samples = np.frombuffer(payload, dtype="<f8").astype(np.float32)
    else:
        raise AudioFormatError(f"unsupported WAV encoding (format tag {tag}, {bits} bits); use 16-bit PCM")
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    if not np.all(np.isfinite(samples)):
        raise AudioFormatError("WAV file contains NaN or infinite samples")
    return np.ascontiguousarray(samples, dtype=np.float32), rate
