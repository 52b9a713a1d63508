"""Many independent utterances stepped together, one 80 ms frame per step.

Every active stream is a row of the flow LM's cache and of Mimi's decoder state; rows
are kept packed at the front (a leaving stream's row is refilled from the last one),
so one step is one batched forward over ``len(batch)`` rows. Streams join (:meth:`add`)
and leave (:meth:`remove`, or by finishing) between steps. Rows differ in cache length
and decoder position; masks keep them independent, so a stream's audio does not
depend on who else is in the batch.

Pipelined mode (``pipelined=True``) overlaps the two halves of a step on two cores:
while the LM computes the next latents, a helper thread owned by the batch decodes
the previous ones with Mimi. Each stream's audio is the same; it arrives one call
later (time to first audio grows by about one LM step, throughput rises to the
slower half). Call :meth:`close` to stop the helper thread.

Not thread-safe: one thread (the scheduler's worker) owns a batch.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from engines.base import EngineError
from engines.pocket.generation import GenerationSettings, Utterance, plan_chunks
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel

FADE_IN_SAMPLES = 120  # 5 ms: a fresh decoder state starts with a small step, heard as a click


@dataclass(frozen=True)
class StepOutput:
    stream_id: int
    pcm: np.ndarray | None  # float32 (frame_samples,), None when this step made no audio
    done: bool  # the stream has finished and left the batch


@dataclass
class _Row:
    stream_id: int
    voice: VoiceState
    utterance: Utterance
    next_input: torch.Tensor  # [latent_dim], NaN = BOS
    fade: bool = True  # the next accepted latent is a chunk's first frame
    pending: torch.Tensor | None = None  # accepted latent waiting for Mimi
    pending_first: bool = False  # ... and it starts a chunk: fresh decoder state, fade in


class StreamBatch:
    def __init__(self, model: PocketModel, max_streams: int = 8, initial_capacity: int = 512,
                 pipelined: bool = False) -> None:
        if max_streams < 1:
            raise ValueError("max_streams: must be at least 1")
        self.model = model
        self.max_streams = max_streams
        self.pipelined = pipelined
        self._decoder: ThreadPoolExecutor | None = None
        self._lm = model.flow_lm.new_cache(max_streams, initial_capacity)
        self._mimi = model.mimi.new_decoder_state(max_streams)
        self._rows: list[_Row] = []
        self._ids = itertools.count(1)
        g = model.geometry
        self._nan = torch.full((g.latent_dim,), float("nan"))
        self._zeros = torch.zeros(g.latent_dim)
        self._fade = torch.linspace(0, 1, FADE_IN_SAMPLES)

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
                return True
        return False

    def _drop(self, index: int) -> None:
        last = len(self._rows) - 1
        if index != last:
            self._lm.copy_row(last, index)
            self._mimi.copy_row(last, index)
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
    def step(self) -> list[StepOutput]:
        """Advance every stream by one frame in one batched forward.

        Pipelined: the audio returned is that of the latents computed by the previous
        call, decoded on the helper thread while this call runs the LM.
        """
        if not self.pipelined:
            self._advance_lm()
            work = self._take_pending()
            return self._collect(self._decode(*work) if work is not None else {})
        job = self._start_decode()
        try:
            self._advance_lm()
        finally:
            decoded = job.result() if job is not None else {}
        return self._collect(decoded)

    def _advance_lm(self) -> None:
        """LM + flow head for every row; accepted latents become the rows' pending frames."""
        for index, row in enumerate(self._rows):
            if row.utterance.chunk_done and not row.utterance.finished:
                self._begin_chunk(index)
        live = [not row.utterance.finished for row in self._rows]
        if not any(live):
            return
        n = len(self._rows)
        inputs = torch.stack([row.next_input for row in self._rows])
        cond, eos_logits = self.model.flow_lm.step(inputs, self._lm.select(slice(0, n)))
        noise = torch.stack([row.utterance.noise() if live[i] else self._zeros
                             for i, row in enumerate(self._rows)])
        latents = self._sample(cond, noise)
        eos = eos_logits.tolist()
        for i, row in enumerate(self._rows):
            if live[i] and row.utterance.accept(eos[i]):
                row.pending, row.pending_first = latents[i], row.fade
                row.fade = False
                row.next_input = latents[i]

    def _start_decode(self) -> Future[dict[int, np.ndarray]] | None:
        work = self._take_pending()
        if work is None:
            return None
        if self._decoder is None:
            self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pocket-mimi")
        return self._decoder.submit(self._decode, *work)

    def _take_pending(self) -> tuple[list[tuple[int, int, bool]], torch.Tensor] | None:
        """Hand the pending latents over (the rows are free for the next LM step).

        Rows without a pending latent are decoded from zeros: each of them is about to
        start a chunk (fresh decoder state) or to leave, so its state does not matter.
        """
        if not any(row.pending is not None for row in self._rows):
            return None
        frames, latents = [], []
        for index, row in enumerate(self._rows):
            if row.pending is None:
                latents.append(self._zeros)
                continue
            frames.append((index, row.stream_id, row.pending_first))
            latents.append(row.pending)
            row.pending = None
        return frames, torch.stack(latents)

    @torch.no_grad()
    def _decode(self, frames: list[tuple[int, int, bool]], latents: torch.Tensor) -> dict[int, np.ndarray]:
        """Mimi-decode one latent per row [0, n) in one call; {stream_id: pcm}."""
        for index, _, first in frames:
            if first:
                self._mimi.reset_row(index)
        flow_lm = self.model.flow_lm
        scaled = latents * flow_lm.emb_std + flow_lm.emb_mean
        audio = self.model.mimi.decode(scaled[:, None, :], self._mimi.select(slice(0, len(latents))))
        out = {}
        for index, stream_id, first in frames:
            frame = audio[index]
            if first:
                frame = frame.clone()
                frame[:FADE_IN_SAMPLES] *= self._fade
            out[stream_id] = frame.numpy().astype(np.float32, copy=True)
        return out

    def _collect(self, decoded: dict[int, np.ndarray]) -> list[StepOutput]:
        outputs = []
        for row in self._rows:
            done = row.utterance.finished and row.pending is None
            outputs.append(StepOutput(row.stream_id, decoded.get(row.stream_id), done))
        for index in reversed(range(len(self._rows))):
            row = self._rows[index]
            if row.utterance.finished and row.pending is None:
                self._drop(index)
        return outputs

    def close(self) -> None:
        """Stop the helper thread of a pipelined batch (idempotent)."""
        if self._decoder is not None:
            self._decoder.shutdown(wait=True)
            self._decoder = None

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
