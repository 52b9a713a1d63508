"""The pieces a Mimi decode job is cut into, and how many frames each takes.

A job (``engines.pocket.batch_decode``) is a list of :class:`DecodeGroup` s, each one
Mimi call over disjoint rows; :class:`DecodeJob` lets the pipelined helper thread and
the thread stepping the batch claim them one at a time, so both can decode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# Frames (rows x frames each) per Mimi call of the 512-wide decoder: fewer pay the
# weights' memory traffic and the per-op cost per frame; more spill the last SEANet
# stages' activations out of the core's cache.
TASK_FRAMES = 4
WIDE_DECODER = 512
JOB_TASKS = 2  # decodes a pipelined job is cut into (one a thread), when it has frames enough


def frames_per_call(decoder_width: int) -> int:
    """How many frames one Mimi call of a decoder ``decoder_width`` wide takes at most.

    A narrower decoder's activations are smaller, so more frames fit the cache, and its
    fixed cost per call (one op per layer however many rows) weighs more: the 128-wide
    decoder of the small models costs 40 % less per frame at 16 frames a call than at 4.
    """
    return TASK_FRAMES * min(4, max(1, WIDE_DECODER // decoder_width))


@dataclass
class DecodeGroup:
    """Rows that decode the same number of latents in one Mimi call."""

    rows: list[int]
    stream_ids: list[int]
    first: list[bool]  # the row's first latent starts a chunk: fresh decoder state, fade in
    latents: torch.Tensor  # [len(rows), count, latent_dim]
    span: slice | None  # decode this contiguous slice of rows in place (others ride along on zeros)


class DecodeJob:
    """Decodes (disjoint rows each) that any thread may claim, one at a time, in order."""

    def __init__(self, groups: list[DecodeGroup], decode: Callable[[DecodeGroup], dict[int, np.ndarray]]) -> None:
        self._groups, self._decode = groups, decode
        self._next = 0
        self._lock = threading.Lock()

    def left(self) -> bool:
        """Whether some decode is not claimed yet."""
        with self._lock:
            return self._next < len(self._groups)

    def run(self) -> dict[int, np.ndarray]:
        """Decode unclaimed groups until none is left; the audio of those this call ran."""
        out: dict[int, np.ndarray] = {}
        while True:
            with self._lock:
                if self._next == len(self._groups):
                    return out
                group = self._groups[self._next]
                self._next += 1
            out.update(self._decode(group))
