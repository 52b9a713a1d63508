"""What the per-connection handlers share: the outbound side of one Wyoming
connection, and Wyoming PCM (any rate, width and channel count) to the
gateway's mono float32."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from gateway.fronts.wyoming.messages import AudioFormat
from gateway.fronts.wyoming.wire import Event, encode_event
from gateway.registry import address_share
from gateway.resampling import LowDelayResampler


class PeerGone(ConnectionError):
    """The client left, or read nothing for longer than the send timeout."""


@dataclass
class Link:
    """Writes events to one client, one at a time, each within ``send_timeout_s``
    (a client that stops reading is dropped, never buffered for)."""

    writer: asyncio.StreamWriter
    client: str  # "host:port", for logs and the session registry
    send_timeout_s: float

    def __post_init__(self) -> None:
        self._lock = asyncio.Lock()

    @property
    def share(self) -> str:
        """The client share (gateway/registry.py) this connection's sessions count against: its address."""
        peer = self.writer.get_extra_info("peername") or ("?", 0)
        return address_share(str(peer[0]))

    def hang_up(self) -> None:
        """Close the connection from this side (the reader then sees its end)."""
        self.writer.close()

    async def send(self, event: Event) -> None:
        async with self._lock:
            if self.writer.is_closing():
                raise PeerGone("the client has left")
            try:
                self.writer.write(encode_event(event))
                await asyncio.wait_for(self.writer.drain(), self.send_timeout_s)
            except asyncio.TimeoutError:
                raise PeerGone(f"the client read nothing for {self.send_timeout_s:g} s") from None
            except (ConnectionError, OSError) as exc:
                raise PeerGone(f"the client has left ({exc.__class__.__name__})") from None


class PcmIn:
    """Wyoming audio chunks -> mono float32 at ``out_rate``. A chunk may split a
    sample frame (the rest waits for the next chunk) or change format (the
    resampler is flushed and replaced)."""

    def __init__(self, out_rate: int) -> None:
        self.out_rate = out_rate
        self._format: AudioFormat | None = None
        self._resampler: LowDelayResampler | None = None
        self._pending = b""

    def feed(self, fmt: AudioFormat, data: bytes) -> np.ndarray:
        parts = []
        if fmt != self._format:
            parts.append(self.flush())
            self._format = fmt
            self._resampler = LowDelayResampler(fmt.rate, self.out_rate)
        data = self._pending + data
        frame = fmt.width * fmt.channels
        usable = len(data) - len(data) % frame
        self._pending = data[usable:]
        assert self._resampler is not None
        parts.append(self._resampler.feed(_to_float(data[:usable], fmt)))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def flush(self) -> np.ndarray:
        """The resampler's tail (a dangling partial sample is dropped)."""
        self._pending = b""
        if self._resampler is None:
            return np.zeros(0, dtype=np.float32)
        out = self._resampler.flush()
        self._resampler, self._format = None, None
        return out


def _to_float(data: bytes, fmt: AudioFormat) -> np.ndarray:
    if fmt.width == 2:
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    elif fmt.width == 4:
        samples = (np.frombuffer(data, dtype="<i4").astype(np.float64) / 2147483648.0).astype(np.float32)
    else:
        samples = (np.frombuffer(data, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if fmt.channels > 1:
        samples = samples.reshape(-1, fmt.channels).mean(axis=1).astype(np.float32)
    return samples


def pcm16(frame: np.ndarray) -> bytes:
    """Float32 samples as 16-bit little-endian PCM."""
    data: bytes = (np.clip(np.asarray(frame, dtype=np.float32), -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    return data
