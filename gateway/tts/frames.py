"""Engine frames to wire bytes: ``FrameEncoder`` converts float32 frames at the
engine's rate to messages at the requested rate and encoding, and
``AudioBytes`` wraps one engine stream as an async iterator of wire bytes for
the HTTP routes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np

from engines.base import EngineError, SynthesisOptions, TtsEngine, TtsStream
from gateway.audio import Encoding, StreamResampler, encode
from gateway.tts.selection import gateway_error


class FrameEncoder:
    """Engine frames (float32 at the native rate) -> wire messages at the requested
    rate and encoding. One per utterance: the resampler's filter state runs across
    frame boundaries, so the concatenated output has no clicks. The resampler
    releases samples in uneven bursts, so a burst longer than ``MAX_MESSAGE_S`` is
    split: every message stays at most 100 ms."""

    MAX_MESSAGE_S = 0.1

    def __init__(self, in_rate: int, out_rate: int, encoding: Encoding) -> None:
        self.encoding = encoding
        self.max_samples = int(out_rate * self.MAX_MESSAGE_S)
        self._resampler = StreamResampler(in_rate, out_rate)

    def feed(self, frame: np.ndarray) -> list[tuple[bytes, int]]:
        """Messages (bytes, sample count) for one frame; empty while the filter fills."""
        return self._split(self._resampler.feed(np.asarray(frame, dtype=np.float32).reshape(-1)))

    def finish(self) -> list[tuple[bytes, int]]:
        """The resampler's tail (nothing at the native rate)."""
        return self._split(self._resampler.flush())

    def _split(self, samples: np.ndarray) -> list[tuple[bytes, int]]:
        if not len(samples):
            return []
        parts = -(-len(samples) // self.max_samples)
        return [(encode(part, self.encoding), len(part)) for part in np.array_split(samples, parts)]


class AudioBytes:
    """Wire bytes of one engine stream, frame by frame; ``aclose()`` cancels the
    engine stream whether or not iteration ever started (a client that hung up)."""

    def __init__(self, stream: TtsStream, encoder: FrameEncoder) -> None:
        self._stream = stream
        self._frames = stream.frames()
        self._encoder = encoder

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for frame in self._frames:
                for data, _ in self._encoder.feed(frame):
                    yield data
            for data, _ in self._encoder.finish():
                yield data
        except EngineError as exc:
            raise gateway_error(exc) from None

    async def aclose(self) -> None:
        self._stream.cancel()
        aclose = getattr(self._frames, "aclose", None)
        if aclose is not None:
            await aclose()


def open_audio(engine: TtsEngine, text: str, voice: str | None, out_rate: int, encoding: Encoding,
               seed: int | None = None) -> AudioBytes:
    """Start synthesizing ``text`` now, so engine errors raise here, before any
    response is sent."""
    try:
        stream = engine.open_stream(text, voice, SynthesisOptions(seed=seed))
    except EngineError as exc:
        raise gateway_error(exc) from None
    return AudioBytes(stream, FrameEncoder(engine.info().sample_rate, out_rate, encoding))
