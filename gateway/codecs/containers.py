"""Opus in a container stream, decoded incrementally: Ogg Opus (RFC 7845) and
WebM with an ``A_OPUS`` track (what browsers' MediaRecorder produces).

Both need PyAV only for the Opus packets; the framing is read here, so bytes
can arrive cut anywhere and a packet is decoded as soon as its page or block is
complete (see ogg.py and webm.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

import numpy as np

from gateway.audio import AudioFormatError
from gateway.codecs.formats import OPUS_DECODE_RATE
from gateway.codecs.limits import MessageBudget, SilentBytes
from gateway.codecs.ogg import OggPacket, OggReader
from gateway.codecs.opus import OpusDecoder, OpusHead
from gateway.codecs.webm import AudioTrack, WebmReader

_EMPTY = np.zeros(0, dtype=np.float32)
# The first bytes of other codecs' Ogg identification headers, to say what was sent.
_OGG_CODECS = ((b"\x01vorbis", "Vorbis"), (b"\x80theora", "Theora"), (b"\x7fFLAC", "FLAC"), (b"Speex   ", "Speex"),
               (b"OpusHead", "Opus"), (b"fishead\0", "Skeleton"))


def concat(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return _EMPTY
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _OpusContainerDecoder(ABC):
    """What both containers share: ``feed`` and ``decode`` over the container's
    reader, each decoded packet counted against the message's decode budget and
    the silent-bytes rule (gateway/codecs/limits.py). A subclass reads its
    container's items into samples (``_samples``, empty for an item that holds
    none) and says how many bytes its reader holds unread (``_held_bytes``)."""

    sample_rate = OPUS_DECODE_RATE

    def __init__(self, reader: OggReader | WebmReader, container: str) -> None:
        self._reader = reader
        self._budget = MessageBudget(OPUS_DECODE_RATE)
        self._silent = SilentBytes(container)
        self._received = 0

    def feed(self, data: bytes) -> np.ndarray:
        return concat(list(self.decode(data)))

    def decode(self, data: bytes) -> Iterator[np.ndarray]:
        """The samples of each packet ``data`` completes, one array a packet."""
        self._budget.start(len(data), self._held_bytes())
        self._received += len(data)
        for item in self._reader.feed(data):
            samples = self._samples(item)
            if len(samples):
                self._budget.spend(len(samples))
                self._silent.heard(self._reader.consumed_bytes)
                yield samples
        self._silent.check(self._received)

    @abstractmethod
    def _held_bytes(self) -> int:
        ...

    @abstractmethod
    def _samples(self, item: Any) -> np.ndarray:
        ...


class OggOpusDecoder(_OpusContainerDecoder):
    """An Ogg byte stream -> mono float32 at 48 kHz. The first Opus logical
    stream is decoded, other streams (video, skeleton) are skipped unread; a new
    Opus stream after the current one's data (a chained file) is followed.
    Bounded as gateway/codecs/limits.py says."""

    def __init__(self) -> None:
        self._ogg = OggReader()
        super().__init__(self._ogg, "Ogg")
        self._serial: int | None = None
        self._opus: OpusDecoder | None = None
        self._headers_left = 0  # OpusTags still to skip
        self._has_data = False
        self._others: list[str] = []

    def _held_bytes(self) -> int:
        return self._ogg.pending_bytes

    def _samples(self, packet: OggPacket) -> np.ndarray:
        if packet.bos:
            self._begin(packet.serial, packet.data)
            return _EMPTY
        if self._serial is None:
            found = ", ".join(self._others) or "no identification header"
            raise AudioFormatError(f"the Ogg stream has no Opus audio (found: {found})")
        if packet.skipped:
            return _EMPTY
        if self._headers_left:
            self._headers_left -= 1
            return _EMPTY
        assert self._opus is not None
        self._has_data = True
        return self._opus.decode(packet.data)

    def _begin(self, serial: int, header: bytes) -> None:
        if not header.startswith(b"OpusHead"):
            self._others.append(next((name for magic, name in _OGG_CODECS if header.startswith(magic)), "unknown"))
            return
        if self._serial is not None and not self._has_data:
            return  # a second Opus stream multiplexed with the first: keep the first
        self._opus = OpusDecoder(OpusHead.parse(header), header)
        self._serial, self._headers_left, self._has_data = serial, 1, False
        self._ogg.select(serial)

    def finish(self) -> np.ndarray:
        if self._ogg.pending_bytes:
            raise AudioFormatError(f"the Ogg stream ended inside a page ({self._ogg.pending_bytes} bytes "
                                   "of it were dropped)")
        return _EMPTY


class WebmOpusDecoder(_OpusContainerDecoder):
    """A WebM byte stream -> mono float32 at 48 kHz, from its first audio track,
    which must be Opus. Bounded as gateway/codecs/limits.py says."""

    def __init__(self) -> None:
        self._webm = WebmReader()
        super().__init__(self._webm, "WebM")
        self._opus: OpusDecoder | None = None

    def _held_bytes(self) -> int:
        return self._webm.buffered_bytes

    def _samples(self, item: AudioTrack | bytes) -> np.ndarray:
        if isinstance(item, AudioTrack):
            self._opus = self._open(item)
            return _EMPTY
        return _EMPTY if self._opus is None else self._opus.decode(item)

    @staticmethod
    def _open(track: AudioTrack) -> OpusDecoder:
        if track.codec != "A_OPUS":
            raise AudioFormatError(f"the WebM audio track is {track.codec or 'of no codec'}; send Opus (A_OPUS)")
        if not track.codec_private:
            raise AudioFormatError("the WebM Opus track has no OpusHead (CodecPrivate)")
        return OpusDecoder(OpusHead.parse(track.codec_private), track.codec_private)

    def finish(self) -> np.ndarray:
        if self._webm.in_element:
            raise AudioFormatError(f"the WebM stream ended inside an element ({self._webm.pending_bytes} bytes "
                                   "of it were dropped)")
        return _EMPTY
