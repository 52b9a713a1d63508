"""One utterance, pulled frame by frame: a batch of one; ``synthesize`` for a whole one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from engines.pocket.batch import StreamBatch
from engines.pocket.generation import GenerationSettings
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel


class PocketStream:
    """Iterate for float32 frames of ``model.frame_samples``; ``cancel()`` between frames.

    The text prompt runs on the first ``next()``. Not thread-safe except ``cancel()``,
    which only sets a flag read before each step.
    """

    def __init__(self, model: PocketModel, text: str, voice: VoiceState,
                 settings: GenerationSettings | None = None, seed: int | None = None) -> None:
        self._batch = StreamBatch(model, max_streams=1)
        self._args = (text, voice, settings, seed)
        self._started = False
        self._cancelled = False
        self._done = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def done(self) -> bool:
        return self._done

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        if not self._started:
            self._started = True
            self._batch.add(*self._args)
        while not self._cancelled and not self._done:
            (out,) = self._batch.step()
            self._done = out.done
            if out.pcm is not None:
                return out.pcm
        self._done = True
        raise StopIteration


def synthesize(model: PocketModel, text: str, voice: VoiceState, settings: GenerationSettings | None = None,
               seed: int | None = None) -> np.ndarray:
    """The whole utterance as one float32 array."""
    frames = list(PocketStream(model, text, voice, settings, seed))
    return np.concatenate(frames) if frames else np.zeros(0, dtype=np.float32)
