"""An end-of-turn model: the probability that the speech heard so far is a finished turn.

The model is Smart Turn v3 (Daily, BSD 2-Clause): a Whisper-tiny encoder with a
classifier head, exported to ONNX, that hears the last 8 s of a turn (prosody as
well as words) and answers one probability. Its weights come with the
``pipecat-ai`` wheel (``find_turn_model``), or from a path the user gives.

Its input is Whisper's log-mel spectrogram of exactly 8 s, the audio
left-padded with zeros and scaled to zero mean and unit variance first, as the
model was trained. The features are computed here with numpy.
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


def _slaney_mel(hz: np.ndarray) -> np.ndarray:
    """Hertz to the Slaney mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    log_step = np.log(6.4) / 27.0
    return np.where(hz < 1000.0, 3.0 * hz / 200.0, 15.0 + np.log(np.maximum(hz, 1e-9) / 1000.0) / log_step)


def _slaney_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    log_step = np.log(6.4) / 27.0
    return np.where(mel < 15.0, 200.0 * mel / 3.0, 1000.0 * np.exp(log_step * (mel - 15.0)))


@functools.lru_cache(maxsize=1)
def mel_filterbank() -> np.ndarray:
    """(N_MELS, N_FFT // 2 + 1) triangular filters, each scaled to unit area (Slaney)."""
    edges = _slaney_hz(np.linspace(0.0, _slaney_mel(RATE / 2), N_MELS + 2))
    bins = np.linspace(0.0, RATE / 2, N_FFT // 2 + 1)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins[None, :] - lower) / (centre - lower)
    falling = (upper - bins[None, :]) / (upper - centre)
    filters = np.maximum(0.0, np.minimum(rising, falling))
    return filters * (2.0 / (upper - lower))


def turn_features(audio: np.ndarray) -> np.ndarray:
    """(1, 80, 800) float32 log-mel features of the last 8 s of 16 kHz ``audio``."""
    n = RATE * WINDOW_S
    x = np.asarray(audio, dtype=np.float32)[-n:]
    x = np.pad(x, (n - len(x), 0))
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    padded = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    power = np.abs(np.fft.rfft(frames * window, axis=-1)) ** 2
    log_mel = np.log10(np.maximum(mel_filterbank() @ power.T, 1e-10))[:, :-1]
    log_mel = np.maximum(log_mel, log_mel.max() - 8.0)
    return ((log_mel + 4.0) / 4.0).astype(np.float32)[None]


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
