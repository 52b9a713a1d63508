"""The pieces a Mimi decode job is cut into, how many frames each takes, and who takes them.

A job (``engines.pocket.batch_decode``) is a list of :class:`DecodeGroup` s, each one
Mimi call over disjoint rows. :class:`DecodeJob` lets the pipelined helper thread
claim them from the front and the thread stepping the batch from the back, so both
decode. The helper starts on a job while the stepping thread runs the LM; for the
two to finish together the helper's part (the front) is the larger one, by the LM
step's time: :class:`DecodeCosts` keeps that estimate.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

# Frames (rows x frames each) per Mimi call of the 512-wide decoder: fewer pay the
# weights' memory traffic and the per-op cost per frame; more spill the last SEANet
# stages' activations out of the core's cache.
TASK_FRAMES = 4
WIDE_DECODER = 512
COST_SMOOTHING = 0.2  # weight of the newest measurement in the running cost estimates


def frames_per_call(decoder_width: int) -> int:
    """How many frames one Mimi call of a decoder ``decoder_width`` wide takes at most.

    A narrower decoder's activations are smaller, so more frames fit the cache, and its
    fixed cost per call (one op per layer however many rows) weighs more: the 128-wide
    decoder of the small models costs 40 % less per frame at 16 frames a call than at 4.
    """
    return TASK_FRAMES * min(4, max(1, WIDE_DECODER // decoder_width))


def helper_share(frames: int, lm_s: float, frame_s: float) -> float:
    """Frames of a job of ``frames`` for the helper, so that both threads end together.

    The helper decodes from the job's start; the stepping thread first runs the LM
    step (``lm_s``), then decodes the rest: h * frame_s = lm_s + (frames - h) * frame_s.
    """
    if frame_s <= 0:
        return frames / 2
    return min(float(frames), (frames + lm_s / frame_s) / 2)


class DecodeCosts:
    """Running estimates (wall seconds) of the LM step and of Mimi per frame.

    Only the thread that steps the batch updates and reads them.
    """

    def __init__(self) -> None:
        self.lm_s = 0.0
        self.frame_s = 0.0  # 0: nothing measured yet

    def add_lm(self, seconds: float) -> None:
        self.lm_s = seconds if self.lm_s == 0 else self.lm_s + COST_SMOOTHING * (seconds - self.lm_s)

    def add_decode(self, frames: int, seconds: float) -> None:
        per_frame = seconds / frames
        self.frame_s = per_frame if self.frame_s == 0 else self.frame_s + COST_SMOOTHING * (per_frame - self.frame_s)

    def helper_share(self, frames: int) -> float:
        return helper_share(frames, self.lm_s, self.frame_s)


@dataclass
class DecodeGroup:
    """Rows that decode the same number of latents in one Mimi call."""

    rows: list[int]
    stream_ids: list[int]
    first: list[bool]  # the row's first latent starts a chunk: fresh decoder state, fade in
    latents: torch.Tensor  # [len(rows), count, latent_dim]
    span: slice | None  # decode this contiguous slice of rows in place (others ride along on zeros)

    @property
    def frames(self) -> int:
        return len(self.rows) * self.latents.shape[1]


def cut(units: list[tuple[int, int]], limit: int) -> list[tuple[int, list[int]]]:
    """``units`` (latent count, row) cut into decodes of one count and at most ``limit`` frames
    (at least one row each), as even as that allows, in order."""
    runs: list[tuple[int, list[int]]] = []
    for count, row in units:
        if runs and runs[-1][0] == count:
            runs[-1][1].append(row)
        else:
            runs.append((count, [row]))
    pieces = []
    for count, rows in runs:
        parts = math.ceil(len(rows) * count / max(1, limit))
        size = math.ceil(len(rows) / parts)
        pieces += [(count, rows[i : i + size]) for i in range(0, len(rows), size)]
    return pieces


class DecodeJob:
    """Decodes (disjoint rows each) that threads claim one at a time: the helper from the
    front, the stepping thread from the back."""

    def __init__(self, groups: list[DecodeGroup], decode: Callable[[DecodeGroup], dict[int, np.ndarray]]) -> None:
        self._groups, self._decode = groups, decode
        self._front, self._back = 0, len(groups)
        self._lock = threading.Lock()
        self.timings: list[tuple[int, float]] = []  # (frames, wall seconds) of every decode run

    def left(self) -> bool:
        """Whether some decode is not claimed yet."""
        with self._lock:
            return self._front < self._back

    def run(self, from_back: bool = False) -> dict[int, np.ndarray]:
        """Decode unclaimed groups until none is left; the audio of those this call ran."""
        out: dict[int, np.ndarray] = {}
        while True:
            with self._lock:
                if self._front == self._back:
                    return out
                if from_back:
                    self._back -= 1
                    group = self._groups[self._back]
                else:
                    group = self._groups[self._front]
                    self._front += 1
            start = time.perf_counter()
            out.update(self._decode(group))
            with self._lock:
                self.timings.append((group.frames, time.perf_counter() - start))
