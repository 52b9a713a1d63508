"""An end-of-turn model: the probability that the speech heard so far is a finished turn.

The model is Smart Turn v3 (Daily, BSD 2-Clause): a Whisper-tiny encoder with a
classifier head, exported to ONNX, that hears the last 8 s of a turn (prosody as
well as words) and answers one probability. Its weights come with the
``pipecat-ai`` wheel (``find_turn_model``), or from a path the user gives.

Its input is Whisper's log-mel spectrogram of exactly 8 s, the audio
left-padded with zeros and scaled to zero mean and unit variance first, as the
model was trained; the spectrogram is faster-whisper's, as the decoder's is.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

RATE = 16000
WINDOW_S = 8
N_FFT = 400
HOP = 160
N_MELS = 80
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"


@functools.lru_cache(maxsize=1)
def _extractor():
    from faster_whisper.feature_extractor import FeatureExtractor

    return FeatureExtractor(feature_size=N_MELS, sampling_rate=RATE, hop_length=HOP, chunk_length=WINDOW_S, n_fft=N_FFT)


def turn_features(audio: np.ndarray) -> np.ndarray:
    """(1, 80, 800) float32 log-mel features of the last 8 s of 16 kHz ``audio``."""
    n = RATE * WINDOW_S
    x = np.asarray(audio, dtype=np.float32)[-n:]
    x = np.pad(x, (n - len(x), 0))
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    return np.ascontiguousarray(_extractor()(x, padding=0)[None], dtype=np.float32)


def find_turn_model() -> Path | None:
    """The model's file in an installed ``pipecat-ai``, or None."""
    spec = importlib.util.find_spec("pipecat")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        bundled = Path(root) / "audio" / "turn" / "smart_turn" / "data" / MODEL_FILE
        if bundled.is_file():
            return bundled
    return None


class TurnModel:
    """One ONNX session; ``complete(audio)`` is the probability that the turn has ended.

    Not safe to call from two threads at once: the sidecar calls it from one.
    """

    def __init__(self, path: Path, threads: int = 1) -> None:
        import onnxruntime  # type: ignore[import-untyped]

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.path = path
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input = self._session.get_inputs()[0].name

    def complete(self, audio: np.ndarray) -> float:
        out = self._session.run(None, {self._input: turn_features(audio)})[0]
        return float(np.ravel(out)[0])
