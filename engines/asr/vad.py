"""Streaming Silero VAD: speech probabilities for every 32 ms window, as audio arrives.

faster-whisper ships the Silero model (ONNX) and runs it over a whole file at
once. A live stream needs the same network run incrementally: the recurrent
state (``h``, ``c``) and the 64-sample context of the previous window are
carried from call to call, which gives exactly the probabilities of a
whole-file pass. One ``StreamingVad`` per stream; the ONNX session is shared
(onnxruntime sessions are safe to call from one thread at a time, and the
sidecar calls them only from its main thread).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np

WINDOW = 512  # samples at 16 kHz (32 ms): the window the model was trained on
CONTEXT = 64


@functools.lru_cache(maxsize=1)
def _session():
    from faster_whisper.vad import get_vad_model

    return get_vad_model().session


class StreamingVad:
    """Feed 16 kHz float32 samples; get ``(window_start_sample, probability)`` pairs."""

    def __init__(self, start_sample: int = 0) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, CONTEXT), dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._next_window = start_sample  # absolute sample index of the next window

    def feed(self, samples: np.ndarray) -> Iterator[tuple[int, float]]:
        data = np.concatenate([self._pending, np.asarray(samples, dtype=np.float32)])
        whole = len(data) - len(data) % WINDOW
        self._pending = data[whole:].copy()
        if not whole:
            return iter(())
        windows = data[:whole].reshape(-1, WINDOW)
        contexts = np.concatenate([self._context, windows[:-1, -CONTEXT:]], axis=0)
        batch = np.ascontiguousarray(np.concatenate([contexts, windows], axis=1))
        probs, self._h, self._c = _session().run(None, {"input": batch, "h": self._h, "c": self._c})
        self._context = windows[-1:, -CONTEXT:].copy()
        first = self._next_window
        self._next_window += whole
        return ((first + i * WINDOW, float(p)) for i, p in enumerate(np.ravel(probs)))
