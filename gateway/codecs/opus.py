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
# Packets whose frames are all empty (a TOC and no coded audio: DTX or a lost packet)
# still decode, to up to 120 ms of concealment each: a few in a row are a gap, more
# are two bytes asking for seconds of audio.
MAX_EMPTY_PACKETS_IN_A_ROW = 10


def frame_lengths(packet: bytes) -> list[int] | None:
    """The lengths of the frames of a non-empty Opus packet, from its TOC byte
    (RFC 6716, section 3.2), or None when the packet is malformed (libopus then
    says why)."""
    code, size = packet[0] & 0x03, len(packet)
    if code == 0:
        return [size - 1]
    if code == 1:
        return [(size - 1) // 2] * 2 if (size - 1) % 2 == 0 else None
    if code == 2:
        first = _length_at(packet, 1)
        if first is None:
            return None
        length, used = first
        rest = size - 1 - used - length
        return [length, rest] if rest >= 0 else None
    return _code3_lengths(packet)


def _length_at(packet: bytes, pos: int) -> tuple[int, int] | None:
    """A frame length coded in one or two bytes at ``pos``: (length, bytes used)."""
    if pos >= len(packet):
        return None
    if packet[pos] < 252:
        return packet[pos], 1
    if pos + 1 >= len(packet):
        return None
    return packet[pos] + 4 * packet[pos + 1], 2


def _code3_lengths(packet: bytes) -> list[int] | None:
    """Code 3: a frame count byte (VBR flag, padding flag, count), padding, lengths."""
    if len(packet) < 2:
        return None
    vbr, padded, count = packet[1] & 0x80, packet[1] & 0x40, packet[1] & 0x3F
    if count == 0:
        return None
    pos, padding = 2, 0
    while padded:
        if pos >= len(packet):
            return None
        padding += 254 if packet[pos] == 255 else packet[pos]
        padded = packet[pos] == 255
        pos += 1
    lengths = []
    if vbr:
        for _ in range(count - 1):
            coded = _length_at(packet, pos)
            if coded is None:
                return None
            lengths.append(coded[0])
            pos += coded[1]
        last = len(packet) - pos - padding - sum(lengths)
        return [*lengths, last] if last >= 0 else None
    data = len(packet) - pos - padding
    return [data // count] * count if data >= 0 and data % count == 0 else None


def is_empty_packet(packet: bytes) -> bool:
    """A packet whose every frame has zero length: no coded audio at all."""
    lengths = frame_lengths(packet) if packet else None
    return lengths is not None and not any(lengths)


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
        self._empty_run = 0  # packets with only empty frames, in a row

    def decode(self, packet: bytes) -> np.ndarray:
        if not packet:
            return np.zeros(0, dtype=np.float32)
        if len(packet) > MAX_PACKET_BYTES:
            raise AudioFormatError(f"an Opus packet of {len(packet)} bytes; the largest valid one is "
                                   f"{MAX_PACKET_BYTES}")
        self._count_empty(packet)
        try:
            frames = self._ctx.decode(self._av.Packet(packet))
        except self._av.FFmpegError as exc:
            raise ffmpeg_error(exc, "an Opus packet does not decode") from None
        parts = [frame_to_mono(frame) for frame in frames]
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _count_empty(self, packet: bytes) -> None:
        if not is_empty_packet(packet):
            self._empty_run = 0
            return
        self._empty_run += 1
        if self._empty_run > MAX_EMPTY_PACKETS_IN_A_ROW:
            raise AudioFormatError(f"{self._empty_run} Opus packets in a row carry no audio (every frame "
                                   f"empty: DTX or padding); at most {MAX_EMPTY_PACKETS_IN_A_ROW} are accepted, "
                                   "send the audio itself (turn DTX off)")

