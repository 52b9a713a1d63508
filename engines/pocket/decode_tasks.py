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


def helper_share(frames: int, lm_s: float, helper_frame_s: float, own_frame_s: float) -> float:
    """Frames of a job of ``frames`` for the helper, so that both threads end together.

    The helper decodes from the job's start at ``helper_frame_s`` a frame; the stepping
    thread first runs the LM step (``lm_s``), then decodes the rest at ``own_frame_s``:
    h * helper_frame_s = lm_s + (frames - h) * own_frame_s. (The helper's frames cost
    more: its decodes share the memory bus with the LM step's.) A rate not measured
    yet (0) is taken to be the other one; with neither, the job is halved.
    """
    helper_frame_s, own_frame_s = helper_frame_s or own_frame_s, own_frame_s or helper_frame_s
    if helper_frame_s <= 0:
        return frames / 2
    return min(float(frames), (lm_s + frames * own_frame_s) / (helper_frame_s + own_frame_s))


def _smoothed(estimate: float, sample: float) -> float:
    return sample if estimate == 0 else estimate + COST_SMOOTHING * (sample - estimate)


class DecodeCosts:
    """Running estimates (wall seconds) of the LM step and of Mimi per frame on each thread.

    Only the thread that steps the batch updates and reads them.
    """

    def __init__(self) -> None:
        self.lm_s = 0.0
        self.helper_frame_s = 0.0  # 0: nothing measured yet
        self.own_frame_s = 0.0  # ... on the thread stepping the batch

    def add_lm(self, seconds: float) -> None:
        self.lm_s = _smoothed(self.lm_s, seconds)

    def add_decode(self, frames: int, seconds: float, on_helper: bool) -> None:
        if on_helper:
            self.helper_frame_s = _smoothed(self.helper_frame_s, seconds / frames)
        else:
            self.own_frame_s = _smoothed(self.own_frame_s, seconds / frames)

    def helper_share(self, frames: int) -> float:
        return helper_share(frames, self.lm_s, self.helper_frame_s, self.own_frame_s)


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
        parts = math.ceil(len(rows) / max(1, limit // count))
        size = math.ceil(len(rows) / parts)
        pieces += [(count, rows[i : i + size]) for i in range(0, len(rows), size)]
    return pieces


def split_job(units: list[tuple[int, int]], share: float, task_frames: int) -> list[tuple[int, list[int]]]:
    """``units`` (latent count, row) cut into decodes, the helper's ``share`` of frames first.

    A part smaller than ``TASK_FRAMES`` frames costs more per frame than it saves, so it
    goes to the helper. A part is cut into decodes of at most 1.5 ``task_frames`` frames
    (one call rather than two small ones).
    """
    due = sum(count for count, _ in units)
    if due - share < TASK_FRAMES:
        share = due
    front, taken = 0, 0
    while front < len(units) and taken + units[front][0] / 2 <= share:
        taken += units[front][0]
        front += 1
    limit = task_frames * 3 // 2
    return cut(units[:front], limit) + cut(units[front:], limit)


class DecodeJob:
    """Decodes (disjoint rows each) that threads claim one at a time: the helper from the
    front, the stepping thread from the back."""

    def __init__(self, groups: list[DecodeGroup], decode: Callable[[DecodeGroup], dict[int, np.ndarray]]) -> None:
        self._groups, self._decode = groups, decode
        self._front, self._back = 0, len(groups)
        self._lock = threading.Lock()
        self.timings: list[tuple[int, float, bool]] = []  # (frames, wall seconds, from the front) a decode

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
                self.timings.append((group.frames, time.perf_counter() - start, not from_back))
