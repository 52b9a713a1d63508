"""Streaming decoders for live audio: bytes as they arrive on a socket ->
mono float32 samples at ``sample_rate``, released as soon as they can be.

- PCM and G.711 decode every whole sample of a message, handed on ``BLOCK_SAMPLES``
  at a time;
- ``opus``: each message is one Opus packet, decoded at once (120 ms at most);
- ``webm`` / ``ogg``: a container byte stream cut anywhere; each packet is
  decoded the moment the block or page that carries it is complete, so the
  decoder adds no delay beyond the container's own framing, and it holds at most
  one element or page in progress, never the stream.

``decode`` yields a message's samples a bounded piece at a time, so its caller can
pace and hand each on (gateway/dictation/audio_in.py); ``feed`` joins them. Both
raise ``AudioFormatError`` saying what is wrong, including a message that decodes
to more than its bytes can carry (gateway/codecs/limits.py). For PCM, G.711 and
raw Opus a bad message spoils nothing after it; a container stream cannot be
trusted past a framing error (``InputEncoding.is_container``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np

from gateway.audio import AudioFormatError, Encoding, PcmDecoder
from gateway.codecs.formats import InputEncoding
from gateway.codecs.g711 import alaw_decode, mulaw_decode

_EMPTY = np.zeros(0, dtype=np.float32)


def concat(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return _EMPTY
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


BLOCK_SAMPLES = 16384  # PCM and G.711 decode this many samples at a time (64 KiB of float32)


class StreamDecoder(Protocol):
    sample_rate: int  # of the samples ``feed`` returns

    def decode(self, data: bytes) -> Iterator[np.ndarray]:
        """The samples of one message, a bounded piece at a time (a block of
        PCM, one Opus packet), as they are decoded; ``AudioFormatError`` when
        the message is bad or asks for more than its bytes can carry."""
        ...

    def feed(self, data: bytes) -> np.ndarray:
        """All of ``decode(data)`` in one array."""
        ...

    def finish(self) -> np.ndarray:
        """The end of the stream: what is left, or ``AudioFormatError`` if it
        ended inside a packet."""
        ...


class PcmStreamDecoder:
    def __init__(self, encoding: Encoding, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._pcm = PcmDecoder(encoding)

    def decode(self, data: bytes) -> Iterator[np.ndarray]:
        # decoded whole first (a float32 copy at most twice the message), so a NaN
        # anywhere refuses the whole message before any of it is handed on
        samples = self._pcm.feed(data)
        for start in range(0, len(samples), BLOCK_SAMPLES):
            yield samples[start:start + BLOCK_SAMPLES]

    def feed(self, data: bytes) -> np.ndarray:
        return self._pcm.feed(data)

    def finish(self) -> np.ndarray:
        return _EMPTY  # an odd trailing byte is half a sample: nothing to hear


class G711Decoder:
    def __init__(self, law: InputEncoding, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._decode = mulaw_decode if law is InputEncoding.MULAW else alaw_decode

    def decode(self, data: bytes) -> Iterator[np.ndarray]:
        view = memoryview(data)
        for start in range(0, len(data), BLOCK_SAMPLES):
            yield self._decode(bytes(view[start:start + BLOCK_SAMPLES]))

    def feed(self, data: bytes) -> np.ndarray:
        return self._decode(data)

    def finish(self) -> np.ndarray:
        return _EMPTY


class OpusPacketDecoder:
    """One Opus packet per message (no container), mono."""

    def __init__(self) -> None:
        from gateway.codecs.opus import OpusDecoder

        self._opus = OpusDecoder()
        self.sample_rate = self._opus.sample_rate

    def decode(self, data: bytes) -> Iterator[np.ndarray]:
        yield self._opus.decode(data)  # at most 120 ms: RFC 6716 caps a packet's duration

    def feed(self, data: bytes) -> np.ndarray:
        return self._opus.decode(data)

    def finish(self) -> np.ndarray:
        return _EMPTY


def stream_decoder(encoding: InputEncoding, sample_rate: int) -> StreamDecoder:
    """The decoder for a dictation socket's ``encoding``; ``sample_rate`` is the
    client's for PCM and G.711 (containers carry their own, Opus decodes at 48 kHz)."""
    if encoding is InputEncoding.PCM_S16LE:
        return PcmStreamDecoder(Encoding.S16LE, sample_rate)
    if encoding is InputEncoding.PCM_F32LE:
        return PcmStreamDecoder(Encoding.F32LE, sample_rate)
    if encoding in (InputEncoding.MULAW, InputEncoding.ALAW):
        return G711Decoder(encoding, sample_rate)
    if encoding is InputEncoding.OPUS:
        return OpusPacketDecoder()
    from gateway.codecs.containers import OggOpusDecoder, WebmOpusDecoder

    return WebmOpusDecoder() if encoding is InputEncoding.WEBM else OggOpusDecoder()


__all__ = ["AudioFormatError", "StreamDecoder", "stream_decoder"]
