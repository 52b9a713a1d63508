"""A streaming resampler with about a millisecond of delay, for the recognizer's input.

soxr's linear-phase filters hold back 12 ms of a 24 kHz stream and 29 ms of an
8 kHz one before they give it out (measured). For audio that is listened to that is
the price of a clean passband; for audio fed to the recognizer it is pure latency:
the end of speech reaches the VAD that much later, and every final with it. Whisper
needs no studio filter: a windowed-sinc with 16 zero crossings each side keeps
aliasing far below speech (tested) and looks ahead ``half`` input samples only.

The resampler is polyphase: output sample ``k`` sits at input position
``k * M / L`` (rates reduced to ``L/M``); its taps are the phase ``(k * M) % L`` of one
Kaiser-windowed sinc, tabulated once. Outputs are emitted as soon as the input
they look ahead to has arrived, so any chunking of the input gives the same
output as one call on all of it. They are computed ``BLOCK`` at a time, so a
large input costs its own size in memory, not a row of taps per output sample.
"""

from __future__ import annotations

import math

import numpy as np

ZERO_CROSSINGS = 16  # each side of the sinc: the filter's length, so its delay and its stopband
CUTOFF = 0.92  # of the lower rate's Nyquist: the transition band lies below it, so little aliases
KAISER_BETA = 8.0  # about 80 dB of window sidelobe rejection
# Outputs computed together: each needs a row of 2 * half taps (70 for 8 kHz input), so
# a block costs about BLOCK * 70 * 8 bytes (2.3 MiB) whatever the size of the input.
BLOCK = 4096


class LowDelayResampler:
    """Same interface as ``gateway.audio.StreamResampler``: ``feed`` chunks, ``flush`` at the end."""

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        common = math.gcd(in_rate, out_rate)
        self._up = out_rate // common  # L
        self._down = in_rate // common  # M
        cutoff = CUTOFF * min(in_rate, out_rate) / 2 / in_rate  # cycles per input sample
        self._half = math.ceil(ZERO_CROSSINGS / (2 * cutoff))  # look-ahead, in input samples
        self._table = _phase_table(self._up, self._half, cutoff)
        # the input seen, from absolute index ``_base`` on; it starts with ``_half``
        # zeros so that the first outputs need no samples from before the stream
        self._buffer = np.zeros(self._half, dtype=np.float32)
        self._base = -self._half
        self._received = 0
        self._emitted = 0

    @property
    def delay_s(self) -> float:
        """How far the output lags the input: the filter's look-ahead."""
        return self._half / self.in_rate

    def feed(self, samples: np.ndarray) -> np.ndarray:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._up == self._down:
            return samples
        self._buffer = np.concatenate([self._buffer, samples])
        self._received += len(samples)
        return self._emit(available=self._received)

    def flush(self) -> np.ndarray:
        """The outputs still held back for their look-ahead, with zeros after the end."""
        if self._up == self._down:
            return np.zeros(0, dtype=np.float32)
        self._buffer = np.concatenate([self._buffer, np.zeros(self._half, dtype=np.float32)])
        total = -(-self._received * self._up // self._down)  # ceil: every input sample is covered
        return self._emit(available=self._received + self._half, limit=total)

    def _emit(self, available: int, limit: int | None = None) -> np.ndarray:
        # output k needs input up to floor(k * M / L) + half (exclusive end: + 1)
        end = ((available - self._half) * self._up + self._down - 1) // self._down
        if limit is not None:
            end = min(end, limit)
        if end <= self._emitted:
            return np.zeros(0, dtype=np.float32)
        out = np.empty(end - self._emitted, dtype=np.float32)
        start = self._emitted
        for first in range(start, end, BLOCK):  # a window row per output: gather a block at a time
            last = min(first + BLOCK, end)
            out[first - start:last - start] = self._block(first, last)
        self._emitted = end
        keep_from = (end * self._down) // self._up - self._half + 1 - self._base  # the next output's first input
        if keep_from > 0:
            self._buffer = self._buffer[keep_from:]
            self._base += keep_from
        return out

    def _block(self, first: int, last: int) -> np.ndarray:
        """Outputs ``first`` to ``last`` (exclusive): ``2 * half`` taps each."""
        up, down, half = self._up, self._down, self._half
        positions = np.arange(first, last, dtype=np.int64) * down
        starts = positions // up - half + 1 - self._base
        windows = self._buffer[starts[:, None] + np.arange(2 * half)]
        block: np.ndarray = np.einsum("ij,ij->i", windows, self._table[positions % up])
        return block


def _phase_table(up: int, half: int, cutoff: float) -> np.ndarray:
    """Row ``p``: the taps for an output ``p / up`` of an input sample past the
    window's middle; each row sums to 1 so that silence and DC pass unchanged."""
    phases = np.arange(up, dtype=np.float64)[:, None] / up
    offsets = phases + half - 1 - np.arange(2 * half, dtype=np.float64)[None, :]  # output minus input position
    window = np.i0(KAISER_BETA * np.sqrt(np.clip(1 - (offsets / half) ** 2, 0, None))) / np.i0(KAISER_BETA)
    taps = 2 * cutoff * np.sinc(2 * cutoff * offsets) * window
    taps /= taps.sum(axis=1, keepdims=True)
    table: np.ndarray = taps.astype(np.float32)
    return table
