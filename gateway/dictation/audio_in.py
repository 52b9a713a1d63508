"""A dictation session's audio path: client bytes -> 16 kHz mono float32 for
the recognizer, decoded and resampled off the event loop a bounded step at a time.

How much audio a message holds is the client's choice (a megabyte of G.711
is two minutes at 16 kHz; an Opus stream's bytes say even less), so the
session never decodes a message in one go on the loop: ``steps`` turns it into
pieces of about ``STEP_SAMPLES`` (the decoder's blocks or packets, resampled as
they come), and ``next_step`` computes each on a worker thread. Between steps
the session hands the piece to the recognizer and lets the pacer hold it, so a
stream ahead of real time stops being decoded, not only read.

Thread-safety: the decoder and resampler are one session's and not
thread-safe; the session awaits each step (and ``end`` and ``flush``, which run
on a worker thread too) before it starts the next, so two never run at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.audio import AudioFormatError
from gateway.codecs.decoders import concat, stream_decoder
from gateway.codecs.formats import InputEncoding
from gateway.resampling import LowDelayResampler

STEP_SAMPLES = ASR_RATE  # a step ends once it holds a second of recognizer audio (plus at most one packet)


class AudioPath:
    """Decoder and resampler of one socket. Raises ``CodecUnavailable`` when
    FFmpeg is missing for ``encoding``."""

    def __init__(self, encoding: InputEncoding, sample_rate: int) -> None:
        self.decoder = stream_decoder(encoding, sample_rate)
        # low delay: the resampler's look-ahead is on the path of every final
        self.resampler = LowDelayResampler(self.decoder.sample_rate, ASR_RATE)

    def steps(self, data: bytes) -> Iterator[np.ndarray]:
        """One message's recognizer audio in pieces of about ``STEP_SAMPLES``,
        never empty; ``AudioFormatError`` where the message goes bad (the
        pieces before it are good)."""
        parts: list[np.ndarray] = []
        held = 0
        for chunk in self.decoder.decode(data):
            out = self.resampler.feed(chunk)
            parts.append(out)
            held += len(out)
            if held >= STEP_SAMPLES:
                yield concat(parts)
                parts, held = [], 0
        if held:
            yield concat(parts)

    @staticmethod
    async def next_step(steps: Iterator[np.ndarray]) -> np.ndarray | None:
        """The next piece, decoded on a worker thread; None when the message is done."""
        return await asyncio.to_thread(next, steps, None)

    async def end(self) -> tuple[np.ndarray, AudioFormatError | None]:
        """The end of the stream, on a worker thread: what the decoder still holds,
        then the resampler's look-ahead; and the decoder's error if the stream
        ended inside a packet (that part is dropped, the rest still counts)."""
        return await asyncio.to_thread(self._end)

    def _end(self) -> tuple[np.ndarray, AudioFormatError | None]:
        try:
            tail, error = self.decoder.finish(), None
        except AudioFormatError as exc:
            tail, error = np.zeros(0, dtype=np.float32), exc
        return np.concatenate([self.resampler.feed(tail), self.resampler.flush()]), error

    async def flush(self) -> np.ndarray:
        """What the resampler holds back for its look-ahead (the drain stops reading)."""
        return await asyncio.to_thread(self.resampler.flush)
