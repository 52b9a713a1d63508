"""Many independent utterances stepped together, one 80 ms frame per step.

Every active stream is a row of the flow LM's cache and of Mimi's decoder state; rows
are kept packed at the front (a leaving stream's row is refilled from the last one),
so one step is one batched forward over ``len(batch)`` rows. Streams join (:meth:`add`)
and leave (:meth:`remove`, or by finishing) between steps. Rows differ in cache length
and decoder position; masks keep them independent, so a stream's audio does not
depend on who else is in the batch. :class:`PausableBatch` can leave some rows out
of a step.

The rows' accepted latents become audio in ``engines.pocket.batch_decode``: several
frames of a stream per Mimi call (``decode_chunk``; a step then returns up to that
many frames of a stream at once, :attr:`StepOutput.frames`), and with
``pipelined=True`` on a helper thread while the LM steps on (:meth:`close` stops it).
A stream's audio is the same either way.

Not thread-safe: one thread (the scheduler's worker) owns a batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from engines.base import EngineError
from engines.pocket.batch_decode import BatchDecoder
from engines.pocket.generation import GenerationSettings, Utterance, plan_chunks
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel


@dataclass(frozen=True)
class StepOutput:
    stream_id: int
    # float32 audio this step made, None if none: one frame (frame_samples,) per step,
    # or with decode_chunk > 1 a whole number of frames (n * frame_samples,)
    pcm: np.ndarray | None
    done: bool  # the stream has finished and left the batch
    frame_samples: int = 1920

    @property
    def frames(self) -> list[np.ndarray]:
        """``pcm`` split into frames, oldest first (empty when there is no audio)."""
        if self.pcm is None:
            return []
        return [self.pcm[i : i + self.frame_samples] for i in range(0, len(self.pcm), self.frame_samples)]


@dataclass
class _Row:
    stream_id: int
    voice: VoiceState
    utterance: Utterance
    next_input: torch.Tensor  # [latent_dim], NaN = BOS
    fade: bool = True  # the next accepted latent is a chunk's first frame
    pending: list[torch.Tensor] = field(default_factory=list)  # accepted latents waiting for Mimi
    starts: list[bool] = field(default_factory=list)  # ... which of them start a chunk (fresh decoder, fade in)
    decoded: int = 0  # latents handed to Mimi so far
    in_flight: int = 0  # ... of which the pipelined helper has not returned the audio yet


class StreamBatch:
    def __init__(self, model: PocketModel, max_streams: int = 8, initial_capacity: int = 512,
                 pipelined: bool = False, decode_chunk: int = 1, eager_frames: int = 1,
                 decode_budget: int = 16) -> None:
        if max_streams < 1:
            raise ValueError("max_streams: must be at least 1")
        if decode_chunk < 1:
            raise ValueError("decode_chunk: must be at least 1")
        if eager_frames < 0:
            raise ValueError("eager_frames: must not be negative")
        self.model = model
        self.max_streams = max_streams
        self.pipelined = pipelined
        self._lm = model.flow_lm.new_cache(max_streams, initial_capacity)
        self._decoder = BatchDecoder(model, max_streams, pipelined, decode_chunk, eager_frames, decode_budget)
        self._rows: list[_Row] = []
        self._ids = itertools.count(1)
        g = model.geometry
        self._nan = torch.full((g.latent_dim,), float("nan"))
        self._zeros = torch.zeros(g.latent_dim)

    def __len__(self) -> int:
        return len(self._rows)

    def stream_ids(self) -> list[int]:
        return [row.stream_id for row in self._rows]

    @torch.no_grad()
    def add(self, text: str, voice: VoiceState, settings: GenerationSettings | None = None,
            seed: int | None = None) -> int:
        """Start an utterance; runs its first text prompt now. Returns its stream id.

        Raises ValueError for text with nothing to say, EngineError when full.
        """
        if len(self._rows) >= self.max_streams:
            raise EngineError(f"batch is full ({self.max_streams} streams)", code="over_capacity")
        g = self.model.geometry
        if (len(voice.layers), voice.kv_heads, voice.head_dim) != (g.lm_layers, g.lm_kv_heads, g.lm_head_dim):
            raise ValueError(f"voice: made for another model ({len(voice.layers)} layers x {voice.kv_heads} "
                             f"heads x {voice.head_dim}; this model has {g.lm_layers} x {g.lm_kv_heads} "
                             f"x {g.lm_head_dim})")
        settings = settings or self.model.defaults
        plans = plan_chunks(self.model.tokenizer, text, settings)
        generator = torch.Generator()
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        utterance = Utterance(plans, settings, self.model.geometry.latent_dim, generator)
        row = _Row(next(self._ids), voice, utterance, self._nan)
        index = len(self._rows)
        self._lm.load_row(index, list(voice.layers), voice.length)
        self._rows.append(row)
        self._begin_chunk(index)
        return row.stream_id

    def remove(self, stream_id: int) -> bool:
        """Drop a stream (cancel). False if it is not in the batch."""
        for index, row in enumerate(self._rows):
            if row.stream_id == stream_id:
                self._drop(index)
                self._decoder.discard(stream_id)  # its waiting latents and audio go with it
                return True
        return False

    def _drop(self, index: int) -> None:
        self._decoder.settle()
        last = len(self._rows) - 1
        if index != last:
            self._lm.copy_row(last, index)
            self._decoder.state.copy_row(last, index)
            self._rows[index] = self._rows[last]
        self._rows.pop()

    def _begin_chunk(self, index: int) -> None:
        row = self._rows[index]
        tokens = row.utterance.begin_chunk()
        self._lm.lengths[index] = row.voice.length  # the voice prefix is never overwritten
        # + 2: a finished row still rides along in the forward while its last frame decodes
        self._lm.ensure_capacity(row.voice.length + len(tokens) + row.utterance.plan.max_steps + 2)
        flow_lm = self.model.flow_lm
        flow_lm.prompt(flow_lm.embed_text(tokens), self._lm.select(slice(index, index + 1)))
        row.next_input, row.fade = self._nan, True  # Mimi restarts at the chunk's first frame

    @torch.no_grad()
    def step(self, hurry: Collection[int] = ()) -> list[StepOutput]:
        """Advance every stream by one frame in one batched forward.

        ``hurry``: stream ids whose waiting latents are decoded now even if fewer than
        ``decode_chunk`` (pipelined: fewer than the stream's next call would take).
        """
        if self.pipelined:
            self._decoder.decode_while(self._advance_lm, self._rows, hurry)
        else:
            self._advance_lm()
            self._decoder.decode_due(self._rows, set(hurry))
        return self._collect()

    def _advance_lm(self) -> bool:
        """LM + flow head for every row; accepted latents become the rows' pending frames.

        False when no row had anything left to compute.
        """
        for index, row in enumerate(self._rows):
            if row.utterance.chunk_done and not row.utterance.finished:
                self._begin_chunk(index)
        live = [not row.utterance.finished for row in self._rows]
        if not any(live):
            return False
        n = len(self._rows)
        inputs = torch.stack([row.next_input for row in self._rows])
        cond, eos_logits = self.model.flow_lm.step(inputs, self._lm.select(slice(0, n)))
        # each stream draws from its own generator: its audio must not depend on the others
        noise = torch.stack([row.utterance.noise() if live[i] else self._zeros
                             for i, row in enumerate(self._rows)])
        latents = self._sample(cond, noise).unbind(0)
        eos = eos_logits.tolist()
        for i, row in enumerate(self._rows):
            if live[i] and row.utterance.accept(eos[i]):
                row.pending.append(latents[i])
                row.starts.append(row.fade)
                row.fade = False
                row.next_input = latents[i]
        return True

    def _collect(self) -> list[StepOutput]:
        outputs = []
        frame_samples = self.model.frame_samples
        # audio of rows left out of this step (paused) waits for them
        ready = self._decoder.take_ready({row.stream_id for row in self._rows})
        for row in self._rows:
            done = row.utterance.finished and not row.pending and not row.in_flight
            pieces = ready.get(row.stream_id)
            pcm = None if pieces is None else pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            outputs.append(StepOutput(row.stream_id, pcm, done, frame_samples))
        # Drop exactly the rows reported done: a drop may collect the helper's audio,
        # which can finish another row only as of the next call.
        finished = {out.stream_id for out in outputs if out.done}
        for index in reversed(range(len(self._rows))):
            if self._rows[index].stream_id in finished:
                self._drop(index)
        return outputs

    def close(self) -> None:
        """Stop the helper thread of a pipelined batch (idempotent)."""
        self._decoder.close()

    def _sample(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        head = self.model.flow_lm.flow_net
        steps = [row.utterance.settings.lsd_steps for row in self._rows]
        if len(set(steps)) == 1:
            return head.sample(cond, noise, steps[0])
        out = torch.empty_like(noise)
        for count in set(steps):
            idx = torch.tensor([i for i, s in enumerate(steps) if s == count])
            out[idx] = head.sample(cond[idx], noise[idx], count)
        return out


class PausableBatch(StreamBatch):
    """A StreamBatch that can leave some rows out of a step.

    Rows stay packed: before a step the paused rows are swapped to the tail (through
    one spare row), the active prefix is stepped, and the paused rows are moved down
    behind the rows that survived the step.
    """

    def __init__(self, model: PocketModel, max_streams: int, pipelined: bool = False, decode_chunk: int = 1) -> None:
        # + the spare row used for swaps
        super().__init__(model, max_streams + 1, pipelined=pipelined, decode_chunk=decode_chunk)
        self.max_streams = max_streams  # admission limit; row max_streams is the spare
        self._spare = max_streams

    def _swap(self, i: int, j: int) -> None:
        self._decoder.settle()
        for state in (self._lm, self._decoder.state):
            state.copy_row(i, self._spare)
            state.copy_row(j, i)
            state.copy_row(self._spare, j)
        self._rows[i], self._rows[j] = self._rows[j], self._rows[i]

    @torch.no_grad()
    def step_active(self, paused: set[int], hurry: set[int] | None = None) -> list[StepOutput]:
        """Step every stream not in ``paused`` (stream ids) by one frame; ``hurry`` as in ``step``."""
        hurry = hurry or set()
        if not paused:
            return self.step(hurry)
        active = 0
        for i in range(len(self._rows)):
            if self._rows[i].stream_id not in paused:
                if i != active:
                    self._swap(i, active)
                active += 1
        if active == 0:
            return []
        tail = self._rows[active:]
        self._rows = self._rows[:active]
        try:
            return self.step(hurry)
        finally:
            head = len(self._rows)
            for j in range(len(tail)):
                if head + j != active + j:
                    self._decoder.settle()
                    self._lm.copy_row(active + j, head + j)
                    self._decoder.state.copy_row(active + j, head + j)
            self._rows = self._rows + tail
