"""What the TTS socket and the TTS HTTP routes share: picking and checking the
engine and voice, turning engine errors into gateway errors, and converting
engine frames to the requested rate and encoding."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import numpy as np

from engines.base import (
    EngineError,
    EngineState,
    EngineUnavailable,
    SynthesisOptions,
    TtsEngine,
    TtsStream,
    UnknownVoice,
)

from .audio import Encoding, StreamResampler, encode
from .errors import BadRequest, GatewayError, NotFound, OverCapacity, Unavailable


def pick_engine(engines: Mapping[str, TtsEngine], engine_id: str) -> TtsEngine:
    """The engine called ``engine_id``; ``BadRequest`` naming the available ones."""
    engine = engines.get(engine_id)
    if engine is None:
        available = ", ".join(sorted(engines)) or "(none: start the gateway with --engines pocket)"
        raise BadRequest(f"engine: unknown engine {engine_id[:40]!r}; available: {available}",
                         code="unknown_engine")
    return engine


def check_ready(engine: TtsEngine) -> None:
    """Raise ``Unavailable`` (what is missing and how to get it) unless the engine is ready."""
    status = engine.status()
    if status.state is EngineState.READY:
        return
    name = engine.info().id
    if status.state is EngineState.LOADING:
        raise Unavailable(f"engine {name} is still loading; try again in a few seconds", retryable=True,
                          retry_after_s=2, extra={"state": status.state.value})
    detail = status.detail or f"engine {name} is {status.state.value}"
    message = f"{detail}. {status.hint}" if status.hint else detail
    raise Unavailable(message, extra={"state": status.state.value, "hint": status.hint})


def voice_ids(engine: TtsEngine) -> list[str]:
    return [v.id for v in engine.voices()]


def resolve_voice(engine: TtsEngine, voice: str | None) -> str | None:
    """``voice`` if the engine has it, the engine's default for None; raises the
    ``unknown_voice`` error listing the available voices."""
    if voice is None:
        return engine.info().default_voice
    available = voice_ids(engine)
    if voice not in available:
        raise unknown_voice(voice, available)
    return voice


def unknown_voice(voice: str, available: list[str]) -> GatewayError:
    exc = UnknownVoice(voice[:64], available)
    return BadRequest(str(exc), code="unknown_voice", extra={"voices": available})


def gateway_error(exc: EngineError) -> GatewayError:
    """The gateway error for an engine error (same code, hint appended)."""
    if isinstance(exc, UnknownVoice):
        return unknown_voice(exc.voice, exc.available)
    message = f"{exc}. {exc.hint}" if exc.hint else str(exc)
    if isinstance(exc, EngineUnavailable):
        return Unavailable(message, extra={"hint": exc.hint} if exc.hint else None)
    if exc.code == "over_capacity":  # the engine's own queue is full: retry shortly
        return OverCapacity(message)
    if exc.code in ("bad_request", "bad_audio"):
        return BadRequest(message, code=exc.code)
    return GatewayError(message, code=exc.code)


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


def not_found_voice(voice: str, available: list[str]) -> NotFound:
    return NotFound(str(UnknownVoice(voice[:64], available)), code="unknown_voice", extra={"voices": available})
