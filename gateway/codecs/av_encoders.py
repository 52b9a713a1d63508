"""MP3, AAC (ADTS), FLAC and Ogg Opus encoders on FFmpeg's codecs (PyAV).

FFmpeg is used for the codecs only; the framing around their packets is
written here, packet by packet, because a muxer would hold bytes back (FFmpeg's
Ogg muxer cuts pages by duration, its I/O layer buffers 32 KiB):

- MP3: the packets are the stream (each an MPEG audio frame with its header);
- AAC: each packet behind a 7-byte ADTS header;
- FLAC: ``fLaC`` and the STREAMINFO block, then the frames (total length and
  MD5 left unknown, as the format allows for a stream);
- Opus: Ogg pages (RFC 7845), one page of 20 ms packets per ``encode`` call,
  so a message of a socket is whole pages and each prefix of the stream plays.
"""

from __future__ import annotations

import secrets
import struct
from typing import Any

import numpy as np

from gateway.codecs.base import AudioEncoder, Encoded
from gateway.codecs.formats import MPEG_RATES, OutputFormat
from gateway.codecs.ogg import OggWriter
from gateway.codecs.pyav import codec_context, load_av

OPUS_FRAME_MS = 20
OPUS_PACKETS_PER_PAGE = 50  # one second a page at most, far below 255 lacing values
VENDOR = b"voxgate"
# FFmpeg codec and the sample format it is fed
CODECS = {OutputFormat.MP3: ("libmp3lame", "fltp"), OutputFormat.AAC: ("aac", "fltp"),
          OutputFormat.FLAC: ("flac", "s16"), OutputFormat.OPUS: ("libopus", "flt")}


def _bit_rate(fmt: OutputFormat, rate: int) -> int:
    if fmt is OutputFormat.OPUS:
        return 32000 if rate >= 16000 else 16000
    return 64000 if rate >= 22050 else 32000


class _AvEncoder:
    """Feeds a codec in whole frames of ``frame_size`` samples and frames its packets."""

    def __init__(self, fmt: OutputFormat, sample_rate: int) -> None:
        self.format = fmt
        self.sample_rate = sample_rate
        self._av = load_av()
        name, sample_fmt = CODECS[fmt]
        ctx: Any = codec_context(name, "w")
        ctx.sample_rate = sample_rate
        ctx.layout = "mono"
        ctx.format = sample_fmt
        if fmt is not OutputFormat.FLAC:
            ctx.bit_rate = _bit_rate(fmt, sample_rate)
        if fmt is OutputFormat.OPUS:
            ctx.options = {"frame_duration": str(OPUS_FRAME_MS), "application": "audio"}
        elif fmt is OutputFormat.FLAC:
            ctx.options = {"frame_size": str(sample_rate // 25)}  # 40 ms blocks: short enough to stream
        ctx.open()
        self._ctx = ctx
        self._sample_fmt = sample_fmt
        self.frame_size = int(ctx.frame_size)
        self._pending = np.zeros(0, dtype=np.float32)
        self._pts = 0
        self.samples_in = 0

    def start(self) -> bytes:
        return b""

    def encode(self, samples: np.ndarray) -> Encoded:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        self.samples_in += len(samples)
        pending = np.concatenate([self._pending, samples]) if len(self._pending) else samples
        whole = len(pending) - len(pending) % self.frame_size
        packets = []
        for start in range(0, whole, self.frame_size):
            packets += self._ctx.encode(self._frame(pending[start:start + self.frame_size]))
        self._pending = pending[whole:].copy()
        return self._wrap([bytes(p) for p in packets], final=False)

    def finish(self) -> Encoded:
        packets = []
        if len(self._pending):
            packets += self._ctx.encode(self._frame(self._pending))  # the codecs take a short last frame
            self._pending = np.zeros(0, dtype=np.float32)
        packets += self._ctx.encode(None)
        return self._wrap([bytes(p) for p in packets], final=True)

    def _frame(self, samples: np.ndarray) -> Any:
        data = np.clip(samples, -1.0, 1.0)
        if self._sample_fmt == "s16":
            data = (data * 32767.0).round().astype(np.int16)
        frame = self._av.AudioFrame.from_ndarray(data.reshape(1, -1), format=self._sample_fmt, layout="mono")
        frame.sample_rate = self.sample_rate
        frame.pts = self._pts
        self._pts += len(samples)
        return frame

    def _wrap(self, packets: list[bytes], final: bool) -> Encoded:
        return Encoded(b"".join(packets), len(packets) * self.frame_size)


class Mp3Encoder(_AvEncoder):
    pass


class AacEncoder(_AvEncoder):
    """ADTS: a 7-byte header per frame (AAC-LC, no CRC) makes the raw packets a stream."""

    def _wrap(self, packets: list[bytes], final: bool) -> Encoded:
        index = MPEG_ADTS_INDEX[self.sample_rate]
        out = bytearray()
        for packet in packets:
            length = len(packet) + 7
            header = (0xFFF << 44) | (1 << 40) | (1 << 38) | (index << 34) | (1 << 30) | (length << 13) | (0x7FF << 2)
            out += header.to_bytes(7, "big") + packet
        return Encoded(bytes(out), len(packets) * self.frame_size)


MPEG_ADTS_INDEX = {rate: index for index, rate in
                   enumerate((96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000))
                   if rate in MPEG_RATES}


class FlacEncoder(_AvEncoder):
    def start(self) -> bytes:
        streaminfo = bytes(self._ctx.extradata or b"")[:34]
        if len(streaminfo) != 34:
            raise RuntimeError("the FLAC encoder gave no STREAMINFO")
        return b"fLaC" + bytes([0x80, 0, 0, 34]) + streaminfo  # the last (only) metadata block


class OggOpusEncoder(_AvEncoder):
    """Ogg Opus: pre-skip and channel layout from the encoder's own OpusHead;
    granule positions count 48 kHz samples, and the last page's trims the
    encoder's padding so a decoder gives back exactly the samples put in."""

    def __init__(self, fmt: OutputFormat, sample_rate: int, serial: int | None = None) -> None:
        super().__init__(fmt, sample_rate)
        head = bytes(self._ctx.extradata or b"")
        if not head.startswith(b"OpusHead") or len(head) < 19:
            raise RuntimeError("the Opus encoder gave no OpusHead")
        self._head = head
        self._pre_skip = struct.unpack_from("<H", head, 10)[0]
        self._ogg = OggWriter(secrets.randbits(32) if serial is None else serial)
        self._granule = 0
        self._packet_48k = self.frame_size * 48000 // sample_rate

    def start(self) -> bytes:
        tags = b"OpusTags" + struct.pack("<I", len(VENDOR)) + VENDOR + struct.pack("<I", 0)
        return self._ogg.page([self._head], 0, bos=True) + self._ogg.page([tags], 0)

    def _wrap(self, packets: list[bytes], final: bool) -> Encoded:
        out = bytearray()
        for first in range(0, max(len(packets), 1 if final else 0), OPUS_PACKETS_PER_PAGE):
            group = packets[first:first + OPUS_PACKETS_PER_PAGE]
            self._granule += len(group) * self._packet_48k
            last = final and first + OPUS_PACKETS_PER_PAGE >= len(packets)
            granule = min(self._granule, self._pre_skip + self.samples_in * 48000 // self.sample_rate) \
                if last else self._granule
            out += self._ogg.page(group, granule, eos=last)
        return Encoded(bytes(out), len(packets) * self.frame_size)


_CLASSES: dict[OutputFormat, type[_AvEncoder]] = {OutputFormat.MP3: Mp3Encoder, OutputFormat.AAC: AacEncoder,
                                                  OutputFormat.FLAC: FlacEncoder, OutputFormat.OPUS: OggOpusEncoder}


def av_encoder(fmt: OutputFormat, sample_rate: int) -> AudioEncoder:
    return _CLASSES[fmt](fmt, sample_rate)
