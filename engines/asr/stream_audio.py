"""The audio one stream keeps, addressed by absolute sample position on its 16 kHz clock.

The policy appends every chunk as it arrives, cuts decode windows out of it by
position, and drops what no utterance can need any more. Chunks are joined
lazily, once, when a window is first cut.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class StreamAudio:
    def __init__(self, start: int) -> None:
        self._chunks: deque[np.ndarray] = deque()
        self.start = start  # absolute position of the first kept sample

    def append(self, samples: np.ndarray) -> None:
        self._chunks.append(samples)

    def slice(self, a: int, b: int) -> np.ndarray:
        """A copy of the kept samples in positions [a, b)."""
        if not self._chunks:
            return np.zeros(0, dtype=np.float32)
        if len(self._chunks) > 1:
            self._chunks = deque([np.concatenate(list(self._chunks))])
        return np.array(self._chunks[0][max(0, a - self.start):max(0, b - self.start)])  # a copy

    def drop_before(self, position: int) -> None:
        """Forget the chunks that end at or before ``position``."""
        while self._chunks and self.start + len(self._chunks[0]) <= position:
            self.start += len(self._chunks.popleft())
