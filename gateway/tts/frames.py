"""Engine frames to wire bytes: ``FrameEncoder`` converts float32 frames at the
engine's rate to messages at the requested rate and format (through the codec
layer, gateway/codecs), and ``AudioBytes`` wraps one engine stream as an async
iterator of wire bytes for the HTTP routes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np

from engines.base import EngineError, SynthesisOptions, TtsEngine, TtsStream
from gateway.audio import StreamResampler
from gateway.codecs.encoders import audio_encoder
from gateway.codecs.formats import OutputFormat
from gateway.tts.selection import check_options, gateway_error


class FrameEncoder:
    """Engine frames (float32 at the native rate) -> wire messages at the requested
    rate and format. One per utterance: the resampler's filter state and the
    codec's run across frame boundaries, so the concatenated output has no clicks.

    PCM and G.711 come out as they are resampled; the resampler releases samples
    in uneven bursts, so a burst longer than ``MAX_MESSAGE_S`` is split: every
    message stays at most 100 ms. A codec (Opus) gives one message per frame
    holding every packet the frame completed: whole Ogg pages, the stream's
    header pages in front of the first."""

    MAX_MESSAGE_S = 0.1

    def __init__(self, in_rate: int, out_rate: int, fmt: OutputFormat) -> None:
        self.format = fmt
        self.max_samples = int(out_rate * self.MAX_MESSAGE_S)
        self._resampler = StreamResampler(in_rate, out_rate)
        self._encoder = audio_encoder(fmt, out_rate)
        self._header = self._encoder.start()

    def take_header(self) -> bytes:
        """The stream's header (WAV, Ogg Opus, FLAC), once; otherwise it goes in
        front of the first message."""
        header, self._header = self._header, b""
        return header

    def feed(self, frame: np.ndarray) -> list[tuple[bytes, int]]:
        """Messages (bytes, sample count) for one frame; empty while the filter or the codec fills."""
        return self._messages(self._resampler.feed(np.asarray(frame, dtype=np.float32).reshape(-1)), final=False)

    def finish(self) -> list[tuple[bytes, int]]:
        """The resampler's tail and what the codec still holds, with its end-of-stream marks."""
        return self._messages(self._resampler.flush(), final=True)

    def _messages(self, samples: np.ndarray, final: bool) -> list[tuple[bytes, int]]:
        out: list[tuple[bytes, int]] = []
        if not self.format.needs_av:
            if len(samples):
                parts = -(-len(samples) // self.max_samples)
                for part in np.array_split(samples, parts):
                    encoded = self._encoder.encode(part)
                    out.append((encoded.data, encoded.samples))
        else:
            encoded = self._encoder.encode(samples)
            data, count = encoded.data, encoded.samples
            if final:
                tail = self._encoder.finish()
                data, count = data + tail.data, count + tail.samples
            if data:
                out.append((data, count))
        if out and self._header:
            out[0] = (self.take_header() + out[0][0], out[0][1])
        return out


class AudioBytes:
    """Wire bytes of one engine stream, frame by frame (the format's header
    first); ``aclose()`` cancels the engine stream whether or not iteration ever
    started (a client that hung up). ``samples`` counts the audio sent so far."""

    def __init__(self, stream: TtsStream, encoder: FrameEncoder) -> None:
        self._stream = stream
        self._frames = stream.frames()
        self._encoder = encoder
        self.samples = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            header = self._encoder.take_header()
            if header:
                yield header
            async for frame in self._frames:
                for data, count in self._encoder.feed(frame):
                    self.samples += count
                    yield data
            for data, count in self._encoder.finish():
                self.samples += count
                yield data
        except EngineError as exc:
            raise gateway_error(exc) from None

    async def aclose(self) -> None:
        self._stream.cancel()
        aclose = getattr(self._frames, "aclose", None)
        if aclose is not None:
            await aclose()


def open_audio(engine: TtsEngine, text: str, voice: str | None, out_rate: int, fmt: OutputFormat,
               seed: int | None = None, options: dict[str, str] | None = None) -> AudioBytes:
    """Start synthesizing ``text`` now, so engine and codec errors raise here,
    before any response is sent."""
    check_options(engine, seed, options)
    encoder = FrameEncoder(engine.info().sample_rate, out_rate, fmt)
    try:
        stream = engine.open_stream(text, voice, SynthesisOptions(seed=seed, extra=dict(options or {})))
    except EngineError as exc:
        raise gateway_error(exc) from None
    return AudioBytes(stream, encoder)
