"""Audio files and streams made at test time by FFmpeg's own muxers and
encoders (PyAV), so the gateway's readers and writers are checked against a
real, independent implementation; and decoders that are not FFmpeg
(libsndfile through ``soundfile``, libFLAC through ``sox``) for the output."""

from __future__ import annotations

import io
import itertools
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import soundfile


def tone(seconds: float, rate: int, freq: float = 440.0) -> np.ndarray:
    """A sine sweep-free tone at -10 dBFS, float32 mono."""
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _sample_format(stream: av.stream.Stream) -> str:
    names = [f.name for f in stream.codec_context.codec.audio_formats]
    return next(n for n in ("fltp", "flt", "s16", "s16p") if n in names)


def ffmpeg_file(container: str, codec: str, samples: np.ndarray, rate: int, *, channels: int = 1,
                options: dict[str, str] | None = None) -> bytes:
    """``samples`` encoded with FFmpeg's ``codec`` into FFmpeg's ``container`` muxer."""
    buf = io.BytesIO()
    out = av.open(buf, "w", format=container)
    stream = out.add_stream(codec, rate=rate, options=options or {})
    layout = "stereo" if channels == 2 else "mono"
    stream.layout = layout
    fmt = _sample_format(stream)
    step = stream.codec_context.frame_size or 1024

    def frames() -> Iterator[av.AudioFrame]:
        for start in range(0, len(samples), step):
            chunk = samples[start:start + step]
            arr = (chunk * 32767).astype(np.int16) if fmt.startswith("s16") else chunk.astype(np.float32)
            arr = np.tile(arr, (channels, 1)) if fmt.endswith("p") else np.repeat(arr, channels).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(arr, format=fmt, layout=layout)
            frame.sample_rate, frame.pts = rate, start
            yield frame

    return _muxed(buf, out, stream, frames())


def ffmpeg_video_only(container: str) -> bytes:
    """A few frames of MPEG-4 video and no audio stream at all."""
    buf = io.BytesIO()
    out = av.open(buf, "w", format=container)
    stream = out.add_stream("mpeg4", rate=25)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"

    def frames() -> Iterator[av.VideoFrame]:
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 20, np.uint8), format="rgb24")
            frame.pts = i
            yield frame

    return _muxed(buf, out, stream, frames())


def _muxed(buf: io.BytesIO, out: Any, stream: Any, frames: Iterable[Any]) -> bytes:
    """Encode ``frames`` into ``stream``, flush the encoder, close ``out`` and
    return the file it wrote into ``buf``."""
    for frame in itertools.chain(frames, [None]):  # None flushes the encoder
        for packet in stream.encode(frame):
            out.mux(packet)
    out.close()
    return buf.getvalue()


def opus_packets(samples: np.ndarray, rate: int, frame_ms: int = 20) -> list[bytes]:
    """Raw Opus packets from FFmpeg's libopus encoder, as a device would send them."""
    ctx = av.CodecContext.create("libopus", "w")
    ctx.sample_rate, ctx.layout, ctx.format = rate, "mono", "flt"
    ctx.options = {"frame_duration": str(frame_ms), "application": "voip"}
    ctx.open()
    packets = []
    for start in range(0, len(samples), ctx.frame_size):
        frame = av.AudioFrame.from_ndarray(samples[start:start + ctx.frame_size].reshape(1, -1), format="flt",
                                           layout="mono")
        frame.sample_rate, frame.pts = rate, start
        packets += [bytes(p) for p in ctx.encode(frame)]
    packets += [bytes(p) for p in ctx.encode(None)]
    return packets


def libsndfile_decode(data: bytes) -> tuple[np.ndarray, int]:
    """Decode with libsndfile (WAV, MP3 through mpg123, Ogg Opus through libopus)."""
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1), rate


def libsndfile_raw(data: bytes, subtype: str, rate: int) -> np.ndarray:
    """Headerless audio (``ULAW``, ``ALAW``, ``PCM_16``, ``FLOAT``) through libsndfile."""
    samples, _ = soundfile.read(io.BytesIO(data), samplerate=rate, channels=1, format="RAW", subtype=subtype,
                                dtype="float32")
    return samples


def sox_decode_flac(data: bytes) -> tuple[np.ndarray, int]:
    """Decode FLAC with sox (libFLAC; a stream of unknown length is fine for it) into a WAV file."""
    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.flac", Path(tmp) / "out.wav"
        source.write_bytes(data)
        subprocess.run(["sox", str(source), "-e", "floating-point", str(target)], capture_output=True, check=True,
                       timeout=60)
        samples, rate = soundfile.read(str(target), dtype="float32", always_2d=True)
    return samples.mean(axis=1), rate


def ffmpeg_decode(data: bytes, container: str) -> tuple[np.ndarray, int]:
    """FFmpeg's demuxer and decoder (for AAC, which nothing else here decodes)."""
    with av.open(io.BytesIO(data), format=container) as source:
        frames = list(source.decode(audio=0))
    samples = np.concatenate([f.to_ndarray().reshape(len(f.layout.channels), -1).mean(axis=0) for f in frames])
    return samples.astype(np.float32), frames[0].sample_rate
