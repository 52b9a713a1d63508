"""Test doubles and helpers for the TTS gateway tests.

``FakeTtsEngine`` implements the ``engines.base.TtsEngine`` interface with no
model: each utterance is ``frames_for(text)`` frames of 1920 samples at 24 kHz
drawn from a generator seeded by (seed or text), yielded with an optional delay
per frame. ``expected_audio`` gives the exact samples a stream will produce, so
tests can compare bytes.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np

from engines.base import (
    CloneRefused,
    EngineState,
    EngineStatus,
    SynthesisOptions,
    TtsInfo,
    UnknownVoice,
    Voice,
)
from engines.options import OPTION_NAMES, check_options

RATE = 24000
FRAME = 1920


def frames_for(text: str) -> int:
    """How many frames the fake produces for ``text``: one per 4 characters, at least 2."""
    return max(2, len(text) // 4)


def seed_for(text: str, options: SynthesisOptions | None) -> int:
    if options is not None and options.seed is not None:
        return options.seed
    return zlib.crc32(text.encode("utf-8"))


def expected_audio(text: str, seed: int | None = None) -> np.ndarray:
    """The exact float32 samples a fake stream yields for ``text`` (and ``seed``)."""
    rng = np.random.default_rng(seed_for(text, SynthesisOptions(seed=seed)))
    return np.concatenate([_frame(rng) for _ in range(frames_for(text))])


def _frame(rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(FRAME) * 0.1).clip(-1, 1).astype(np.float32)


class FakeStream:
    def __init__(self, engine: FakeTtsEngine, text: str, voice: str | None, options: SynthesisOptions | None):
        self.engine, self.text, self.voice = engine, text, voice
        self.options = options
        self.rng = np.random.default_rng(seed_for(text, options))
        self.total = engine.frames_by_text.get(text, frames_for(text))
        self.produced = 0
        self.cancelled = False
        self.closed = False

    async def frames(self) -> AsyncIterator[np.ndarray]:
        try:
            for _ in range(self.total):
                if self.cancelled:
                    return
                if self.engine.frame_delay_s:
                    await asyncio.sleep(self.engine.frame_delay_s)
                if self.engine.fail_after is not None and self.produced >= self.engine.fail_after:
                    from engines.base import EngineError

                    raise EngineError("fake engine failure", code="engine_error")
                self.produced += 1
                self.engine.frames_produced += 1
                yield _frame(self.rng)
        finally:
            self.closed = True

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeTtsEngine:
    """Deterministic TtsEngine without a model (see module docstring)."""

    frame_delay_s: float = 0.0
    state: EngineState = EngineState.READY
    detail: str = ""
    hint: str = ""
    can_clone: bool = True
    engine_id: str = "pocket"
    frames_by_text: dict[str, int] = field(default_factory=dict)  # frame counts other than frames_for(text)
    fail_after: int | None = None  # raise EngineError after this many frames
    open_error: Exception | None = None  # raised by open_stream (e.g. the engine's queue is full)
    builtin: tuple[str, ...] = ("alba", "marius")
    cloned: dict[str, bytes] = field(default_factory=dict)
    transcripts: dict[str, str | None] = field(default_factory=dict)  # what clone_voice was told the clip says
    streams: list[FakeStream] = field(default_factory=list)
    frames_produced: int = 0
    options: tuple[str, ...] = OPTION_NAMES  # the options it honours (a real engine's subset: Piper ("speaker",))
    clone_uses_transcript: bool = True  # as OmniVoice; False as Pocket

    def info(self) -> TtsInfo:
        return TtsInfo(id=self.engine_id, sample_rate=RATE, frame_samples=FRAME, languages=("en",),
                       can_clone=self.can_clone, default_voice=self.builtin[0], options=self.options,
                       clone_uses_transcript=self.clone_uses_transcript)

    def status(self) -> EngineStatus:
        return EngineStatus(self.state, self.detail, self.hint)

    async def load(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def voices(self) -> list[Voice]:
        return [Voice(v, self.engine_id) for v in self.builtin] + [
            Voice(v, self.engine_id, source="cloned") for v in self.cloned]

    def open_stream(self, text: str, voice: str | None = None, options: SynthesisOptions | None = None) -> FakeStream:
        if self.open_error is not None:
            raise self.open_error
        known = [v.id for v in self.voices()]
        if voice is not None and voice not in known:
            raise UnknownVoice(voice, known)
        check_options(self.info(), options)
        stream = FakeStream(self, text, voice, options)
        self.streams.append(stream)
        return stream

    async def clone_voice(self, voice_id: str, wav_bytes: bytes, transcript: str | None = None) -> Voice:
        if not self.can_clone:
            raise CloneRefused("this fake cannot clone")
        self.cloned[voice_id] = wav_bytes
        self.transcripts[voice_id] = transcript
        return Voice(voice_id, self.engine_id, source="cloned")

    async def delete_voice(self, voice_id: str) -> None:
        self.cloned.pop(voice_id, None)
