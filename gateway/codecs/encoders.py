"""Streaming encoders for speech output: mono float32 at ``sample_rate`` in,
bytes of the requested format out, call by call, so a route can send each piece
the moment it exists.

An encoder's life: ``start()`` once (the stream's header: a WAV header, the Ogg
Opus header pages, FLAC's STREAMINFO; empty for headerless formats), then
``encode(samples)`` per chunk of audio, then ``finish()`` (what the codec still
holds, and the end-of-stream marks). Each result says how many samples of audio
its bytes carry. PCM, WAV and G.711 are numpy; MP3, Opus, AAC and FLAC are FFmpeg
through PyAV, imported only when one of them is asked for.
"""

from __future__ import annotations

import numpy as np

from gateway.audio import Encoding, encode, wav_header
from gateway.codecs.base import EMPTY, AudioEncoder, Encoded
from gateway.codecs.formats import OutputFormat
from gateway.codecs.g711 import alaw_encode, mulaw_encode


class SampleEncoder:
    """Formats where every sample becomes bytes on its own: PCM, WAV, G.711."""

    def __init__(self, fmt: OutputFormat, sample_rate: int) -> None:
        self.format = fmt
        self.sample_rate = sample_rate

    def start(self) -> bytes:
        return wav_header(self.sample_rate, Encoding.S16LE) if self.format is OutputFormat.WAV else b""

    def encode(self, samples: np.ndarray) -> Encoded:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        fmt = self.format
        if fmt is OutputFormat.MULAW:
            data = mulaw_encode(samples)
        elif fmt is OutputFormat.ALAW:
            data = alaw_encode(samples)
        else:
            data = encode(samples, Encoding.F32LE if fmt is OutputFormat.PCM_F32LE else Encoding.S16LE)
        return Encoded(data, len(samples))

    def finish(self) -> Encoded:
        return EMPTY


def audio_encoder(fmt: OutputFormat, sample_rate: int) -> AudioEncoder:
    """An encoder for ``fmt`` at ``sample_rate`` (checked against what the codec
    can do: ``ValueError``). Raises ``CodecUnavailable`` when PyAV is missing."""
    fmt.check_rate(sample_rate)
    if not fmt.needs_av:
        return SampleEncoder(fmt, sample_rate)
    from gateway.codecs.av_encoders import av_encoder

    return av_encoder(fmt, sample_rate)
