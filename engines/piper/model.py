"""One loaded Piper voice: text to phoneme ids per sentence, and phoneme ids
to audio, on the ``piper-tts`` runtime.

The ONNX sessions are made here rather than by ``PiperVoice.load`` so their
threading is ours. Each voice has two sessions over the same model file:

- *narrow*: one thread per inference. The engine's pool runs several of these
  at once, which beats one inference spread over every core when streams
  compete: VITS parallelises poorly inside a call, and spinning intra-op
  threads fight every other inference (and process) for the cores;
- *wide*: ONNX Runtime's defaults (every core), used when an inference has the
  machine to itself, so a lone request is as fast as Piper's own tools make it.

Thread safety: ``infer`` may run on several threads at once (an ONNX Runtime
session is safe for concurrent ``run`` calls); ``phonemize`` too (piper keeps
espeak-ng behind its own lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from engines.piper.voices import VoiceFile

INSTALL_HINT = "pip install piper-tts (the Piper runtime; scripts/setup.sh installs it)"


class Synthesizer(Protocol):
    """What a Piper stream needs from a voice (the tests give it fakes)."""

    sample_rate: int
    speakers: dict[str, int]

    def phonemize(self, text: str) -> list[list[int]]:
        """Phoneme ids of each sentence of ``text``, in order (empty sentences dropped)."""
        ...

    def infer(self, phoneme_ids: Sequence[int], speaker_id: int | None = None, wide: bool = False) -> np.ndarray:
        """Float32 mono audio at ``sample_rate`` for one sentence; ``wide``: the
        inference may use every core (nothing else runs)."""
        ...


def runtime_missing() -> str | None:
    """Why the Piper runtime cannot be imported here, or None when it can."""
    try:
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401
        import piper  # noqa: F401
    except ImportError as exc:
        return f"the Piper runtime is not installed ({exc})"
    return None


class PiperModel:
    """A Piper voice loaded into an ONNX Runtime session (see module docstring)."""

    def __init__(self, voice: VoiceFile, wide: bool = True) -> None:
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig

        narrow = onnxruntime.SessionOptions()
        narrow.intra_op_num_threads = 1
        narrow.inter_op_num_threads = 1
        narrow.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(str(voice.model), sess_options=narrow,
                                               providers=["CPUExecutionProvider"])
        self._wide: Any = onnxruntime.InferenceSession(
            str(voice.model), providers=["CPUExecutionProvider"]) if wide else None
        # PiperVoice does the phonemes and the tensors; its session is chosen per call.
        self._voice: Any = PiperVoice(session=session, config=PiperConfig.from_dict(voice.raw))
        self._wide_voice: Any = PiperVoice(session=self._wide, config=self._voice.config) if wide else None
        self.voice = voice
        self.sample_rate = voice.sample_rate
        self.speakers = dict(self._voice.config.speaker_id_map)

    def phonemize(self, text: str) -> list[list[int]]:
        # Piper splits sentences while phonemizing (espeak-ng's own clause rules).
        text = " ".join(text.split())
        return [self._voice.phonemes_to_ids(phonemes) for phonemes in self._voice.phonemize(text) if phonemes]

    def infer(self, phoneme_ids: Sequence[int], speaker_id: int | None = None, wide: bool = False) -> np.ndarray:
        from piper.config import SynthesisConfig

        voice = self._wide_voice if wide and self._wide_voice is not None else self._voice
        audio = voice.phoneme_ids_to_audio(list(phoneme_ids), SynthesisConfig(speaker_id=speaker_id))
        return peak_normalize(np.asarray(audio, dtype=np.float32).reshape(-1))


def peak_normalize(audio: np.ndarray) -> np.ndarray:
    """Scale a sentence so its loudest sample is at full range, as Piper's own
    synthesis does (VITS output levels vary from sentence to sentence)."""
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if peak < 1e-8:
        return np.zeros_like(audio, dtype=np.float32)
    return np.clip(audio / peak, -1.0, 1.0).astype(np.float32)
