"""Opus packets to samples (libopus through PyAV), as the containers and the
raw-packet socket need it: mono float32 at 48 kHz, the encoder's pre-skip
dropped, a packet decoded the moment it is complete (Opus adds no decoding
delay of its own)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from gateway.audio import AudioFormatError
from gateway.codecs.formats import OPUS_DECODE_RATE
from gateway.codecs.pyav import codec_context, ffmpeg_error, frame_to_mono, load_av

MAX_PACKET_BYTES = 1275 * 3 * 2  # RFC 6716: at most 1275 bytes a frame, 3 frames of a 60 ms packet; 2 streams
MAX_CHANNELS = 2  # mapping family 0: mono or stereo


@dataclass(frozen=True)
class OpusHead:
    """The identification header (RFC 7845, section 5.1)."""

    channels: int
    pre_skip: int  # samples at 48 kHz to drop from the start
    input_rate: int
    mapping_family: int

    @classmethod
    def parse(cls, data: bytes) -> OpusHead:
        if len(data) < 19 or data[:8] != b"OpusHead":
            raise AudioFormatError("the stream's first packet is not an OpusHead (not an Opus stream)")
        version, channels, pre_skip, input_rate, _gain, family = struct.unpack_from("<BBHIhB", data, 8)
        if version >> 4:
            raise AudioFormatError(f"OpusHead version {version} is not supported (only 0.x and 1.x exist)")
        if channels == 0:
            raise AudioFormatError("OpusHead declares 0 channels")
        if family != 0 or channels > MAX_CHANNELS:
            raise AudioFormatError(f"an Opus stream of {channels} channels (mapping family {family}); "
                                   "send mono or stereo")
        return cls(channels=channels, pre_skip=pre_skip, input_rate=input_rate, mapping_family=family)


class OpusDecoder:
    """Opus packets -> mono float32 at 48 kHz. ``head`` None: raw packets with no
    stream header (a device's own framing): mono, nothing to skip. Given the
    OpusHead bytes as ``extradata``, FFmpeg itself drops the pre-skip."""

    sample_rate = OPUS_DECODE_RATE

    def __init__(self, head: OpusHead | None = None, extradata: bytes | None = None) -> None:
        av = load_av()
        self._av = av
        ctx: Any = codec_context("libopus", "r")
        ctx.sample_rate = OPUS_DECODE_RATE
        ctx.layout = "stereo" if head is not None and head.channels == 2 else "mono"
        if extradata:
            ctx.extradata = extradata
        ctx.open()
        self._ctx = ctx

    def decode(self, packet: bytes) -> np.ndarray:
        if not packet:
            return np.zeros(0, dtype=np.float32)
        if len(packet) > MAX_PACKET_BYTES:
            raise AudioFormatError(f"an Opus packet of {len(packet)} bytes; the largest valid one is "
                                   f"{MAX_PACKET_BYTES}")
        try:
            frames = self._ctx.decode(self._av.Packet(packet))
        except self._av.FFmpegError as exc:
            raise ffmpeg_error(exc, "an Opus packet does not decode") from None
        parts = [frame_to_mono(frame) for frame in frames]
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

