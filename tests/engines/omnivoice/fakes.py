"""A small fake of the OmniVoice model (the engine's ``Backend``), for the adapter's unit tests.

``FakeBackend.generate`` returns ``samples_for(text)`` samples whose values
encode the sentence (every sample of sentence "abc" is ``level_for("abc")``), so
a test can tell from the frames which sentence they came from. ``gates`` holds
a ``threading.Event`` per sentence text: its generation blocks until the event
is set, which lets a test hold the worker in the middle of an utterance.
Every call is recorded, in order, in ``calls``.
"""

from __future__ import annotations

import io
import threading
import zlib
from dataclasses import dataclass, field

import numpy as np

from engines.omnivoice.backend import LoadSpec, PackageChecks
from engines.omnivoice.prompts import PromptData

RATE = 24000
FRAME = 1920


def samples_for(text: str) -> int:
    """How long the fake's audio for ``text`` is: 1000 samples per character (not a whole number of frames)."""
    return 1000 * len(text)


def level_for(text: str) -> float:
    return round(0.01 + (zlib.crc32(text.encode()) % 90) / 100, 2)


def checks() -> PackageChecks:
    def check_instruct(value: str) -> str:
        if "robot" in value:
            raise ValueError(f"Unsupported instruct items: {value!r}")
        return value

    return PackageChecks(frozenset({"en", "de", "zh"}), {"english": "en", "german": "de"}, check_instruct)


def wav_bytes(seconds: float = 2.0, rate: int = 16000, seed: int = 0) -> bytes:
    import soundfile

    audio = (np.random.default_rng(seed).standard_normal(int(seconds * rate)) * 0.1).astype(np.float32)
    buf = io.BytesIO()
    soundfile.write(buf, audio, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@dataclass
class FakeBackend:
    can_transcribe: bool = False
    fingerprint: str = "fake-1"
    device: str = "cpu"
    sample_rate: int = RATE
    calls: list[tuple[str, str]] = field(default_factory=list)  # ("generate"|"prompt", text)
    generated: list[dict[str, object]] = field(default_factory=list)  # the keyword arguments of each generate
    gates: dict[str, threading.Event] = field(default_factory=dict)
    started: dict[str, threading.Event] = field(default_factory=dict)  # set when that sentence starts generating
    fail_on: str | None = None
    closed: bool = False

    def generate(self, text: str, *, prompt: PromptData | None, instruct: str | None, language: str | None,
                 seed: int | None) -> np.ndarray:
        self.calls.append(("generate", text))
        self.generated.append({"text": text, "prompt": prompt.ref_text if prompt else None, "instruct": instruct,
                               "language": language, "seed": seed})
        self.started.setdefault(text, threading.Event()).set()
        gate = self.gates.get(text)
        if gate is not None:
            assert gate.wait(30), f"test never released {text!r}"
        if text == self.fail_on:
            raise RuntimeError("fake model failure")
        return np.full(samples_for(text), level_for(text), dtype=np.float32)

    def make_prompt(self, audio: np.ndarray, rate: int, transcript: str | None) -> PromptData:
        self.calls.append(("prompt", transcript or ""))
        if transcript is None:
            assert self.can_transcribe, "asked to transcribe without a transcriber"
            transcript = "transcribed words."
        if not np.abs(audio).max() > 0:
            raise ValueError("Reference audio is empty after silence removal.")
        codes = np.arange(16, dtype=np.int64).reshape(8, 2) + len(audio) % 7
        return PromptData(codes=codes, ref_text=transcript, ref_rms=float(np.sqrt(np.mean(audio ** 2))))

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeLoader:
    """The engine's ``loader``: hands out ``backend`` (or raises ``error``), counting loads."""

    backend: FakeBackend = field(default_factory=FakeBackend)
    error: Exception | None = None
    loads: int = 0
    specs: list[LoadSpec] = field(default_factory=list)

    def __call__(self, spec: LoadSpec) -> FakeBackend:
        self.specs.append(spec)
        if self.error is not None:
            raise self.error
        self.loads += 1
        self.backend.closed = False
        return self.backend
