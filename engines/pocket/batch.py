"""Many independent utterances stepped together, one 80 ms frame per step.

Every active stream is a row of the flow LM's cache and of Mimi's decoder state; rows
are kept packed at the front (a leaving stream's row is refilled from the last one),
so one step is one batched forward over ``len(batch)`` rows. Streams join (:meth:`add`)
and leave (:meth:`remove`, or by finishing) between steps. Rows differ in cache length
and decoder position; masks keep them independent, so a stream's audio does not
depend on who else is in the batch.

Pipelined mode (``pipelined=True``) runs Mimi on a helper thread owned by the batch,
on its own core, while the LM keeps stepping: when the helper is free and enough
latents are queued (see :meth:`_worth_a_call`), a call hands it every latent accepted
since its last job (up to ``decode_chunk`` per stream), and returns whatever the
helper has finished. The LM therefore runs ahead while Mimi decodes several frames
per call, which is cheaper per frame. A job is a
list of small independent decodes (disjoint rows, about ``TASK_FRAMES`` frames
each); when the LM has to wait for the helper (a stream has ``2 * decode_chunk``
latents queued, or there is nothing left to step), it takes the job's remaining
decodes itself, so with many streams, where Mimi costs more than the LM, both
cores decode. Each stream's audio is the same; it arrives at least one call later.
Call :meth:`close` to stop the helper.

Chunked decoding without pipelining (``decode_chunk=K > 1``): Mimi costs less per
frame when it decodes several at once, so a stream's accepted latents may wait and
be decoded K at a time. A row is decoded as soon as it has K latents waiting, its text chunk or
utterance has ended (a new chunk restarts the decoder), it has not yet produced
``eager_frames`` frames (time to first audio is unchanged), or the caller names it
in ``hurry`` (its listener is short of audio). Mimi decoding is chunk-invariant, so
the audio is the same as one frame per call; a step then returns up to K frames of
a stream at once (:attr:`StepOutput.frames`).

Not thread-safe: one thread (the scheduler's worker) owns a batch.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from engines.base import EngineError
from engines.pocket.generation import GenerationSettings, Utterance, plan_chunks
from engines.pocket.voice import VoiceState

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel

FADE_IN_SAMPLES = 120  # 5 ms: a fresh decoder state starts with a small step, heard as a click
# Frames (rows x frames each) per Mimi call: fewer pay the weights' memory traffic
# per frame; more spill the last SEANet stages' activations out of the core's cache.
TASK_FRAMES = 4


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
class _DecodeGroup:
    """Rows that decode the same number of latents in one Mimi call."""

    rows: list[int]
    stream_ids: list[int]
    first: list[bool]  # the row's first latent starts a chunk: fresh decoder state, fade in
    latents: torch.Tensor  # [len(rows), count, latent_dim]
    span: slice | None  # decode this contiguous slice of rows in place (others ride along on zeros)


class _DecodeJob:
    """Decodes (disjoint rows each) that any thread may claim, one at a time, in order."""

    def __init__(self, groups: list[_DecodeGroup], decode: Callable[[_DecodeGroup], dict[int, np.ndarray]]) -> None:
        self._groups, self._decode = groups, decode
        self._next = 0
        self._lock = threading.Lock()

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
        self.decode_chunk, self.eager_frames, self.decode_budget = decode_chunk, eager_frames, decode_budget
        self.model = model
        self.max_streams = max_streams
        self.pipelined = pipelined
        self._decoder: ThreadPoolExecutor | None = None
        self._job: Future[dict[int, np.ndarray]] | None = None  # the helper's current decode
        self._job_work: _DecodeJob | None = None  # ... its decodes, which this thread may help with
        self._job_rows: list[_Row] = []  # ... and the rows it decodes for
        self._job_eager = False  # ... some of them a stream's first frames
        self._ready: dict[int, list[np.ndarray]] = {}  # decoded audio not yet returned
        self._hurry: set[int] = set()  # the current step's hurried streams (pipelined)
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
                self._ready.pop(stream_id, None)  # its waiting latents and audio go with it
                return True
        return False

    def _drop(self, index: int) -> None:
        self._settle()
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
    def step(self, hurry: Collection[int] = ()) -> list[StepOutput]:
        """Advance every stream by one frame in one batched forward.

        ``hurry``: stream ids whose waiting latents are decoded now even if fewer than
        ``decode_chunk`` (pipelined: fewer than the stream's next call would take).
        """
        if not self.pipelined:
            self._advance_lm()
            groups = self._take_pending(set(hurry))
            if groups:
                self._keep(self._decode(groups))
            return self._collect()
        self._hurry = set(hurry)
        self._harvest(wait=False)
        self._start_decode()
        if any(len(row.pending) >= 2 * self.decode_chunk for row in self._rows):
            self._harvest(wait=True)  # bounded queue: the LM waits for Mimi to catch up
            self._start_decode()
        lm_ran = self._advance_lm()
        if self._job is not None and (self._job_eager or not lm_ran):
            # a stream's first frames are returned by this call (time to first audio);
            # with nothing left for the LM, waiting for the audio is all there is to do
            self._harvest(wait=True)
            self._start_decode()
        return self._collect()

    def _keep(self, decoded: dict[int, np.ndarray]) -> None:
        for stream_id, pcm in decoded.items():
            self._ready.setdefault(stream_id, []).append(pcm)

    def _harvest(self, wait: bool) -> None:
        """Take the helper's finished audio (waiting for it if ``wait``)."""
        job = self._job
        if job is None or not (wait or job.done()):
            return
        self._job = None
        try:
            if wait and self._job_work is not None:
                self._keep(self._job_work.run())  # rather than idle: decode what the helper has not begun
            self._keep(job.result())
        finally:
            self._job_work = None
            for row in self._job_rows:
                row.in_flight = 0
            self._job_rows = []

    def _settle(self) -> None:
        """Let a running decode finish before Mimi rows are moved."""
        self._harvest(wait=True)

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
        noise = torch.stack([row.utterance.noise() if live[i] else self._zeros
                             for i, row in enumerate(self._rows)])
        latents = self._sample(cond, noise)
        eos = eos_logits.tolist()
        for i, row in enumerate(self._rows):
            if live[i] and row.utterance.accept(eos[i]):
                row.pending.append(latents[i])
                row.starts.append(row.fade)
                row.fade = False
                row.next_input = latents[i]
        return True

    def _start_decode(self) -> None:
        """Give the helper everything queued, if it is free."""
        if self._job is not None or not self._worth_a_call():
            return
        groups = self._take_pending(self._hurry)
        if not groups:
            return
        if self._decoder is None:
            self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pocket-mimi")
        self._job_rows = [self._rows[i] for group in groups for i in group.rows]
        self._job_eager = any(row.decoded - row.in_flight < self.eager_frames for row in self._job_rows)
        self._job_work = _DecodeJob(groups, self._decode_group)
        self._job = self._decoder.submit(self._job_work.run)

    def _worth_a_call(self) -> bool:
        """Whether to start a decode now, rather than let the latents queue up.

        A call with fewer than ``TASK_FRAMES`` frames costs Mimi nearly twice as much
        per frame, time the LM on the other core loses to the shared memory. So with
        few frames queued (one stream, mostly) the helper waits until some stream has
        a full call's worth (``decode_chunk``, ramping up from one frame over its
        first calls), a text chunk ends, or a stream is hurried.
        """
        if sum(len(row.pending) for row in self._rows) >= TASK_FRAMES:
            return True
        for row in self._rows:
            if not row.pending:
                continue
            new_chunk_queued = any(row.starts[1:])
            if (len(row.pending) >= min(self.decode_chunk, max(1, row.decoded)) or new_chunk_queued
                    or row.utterance.chunk_done or row.stream_id in self._hurry):
                return True
        return False

    def _due(self, row: _Row, hurry: set[int], cap: int) -> int:
        """How many of the row's waiting latents to decode now (0: let them wait).

        One call never crosses into a new text chunk: the decoder restarts there.
        """
        if not row.pending:
            return 0
        same_chunk = next((i for i in range(1, len(row.starts)) if row.starts[i]), len(row.starts))
        if self.pipelined:
            # ramp up: never more frames in one call than the stream already has out,
            # so a listener's buffer grows before the gaps between deliveries do
            return min(same_chunk, cap, max(1, row.decoded))
        if (len(row.pending) >= self.decode_chunk or row.utterance.chunk_done or same_chunk < len(row.pending)
                or row.decoded < self.eager_frames or row.stream_id in hurry):
            return same_chunk
        return 0

    def _idle_row(self, row: _Row) -> bool:
        """Decoding zeros on this row is harmless: it restarts its decoder next or leaves."""
        return not row.pending and row.utterance.chunk_done

    def _take_pending(self, hurry: set[int]) -> list[_DecodeGroup]:
        """Hand the due latents over (the rows are free for the next LM step).

        Rows are grouped by how many latents they decode. A group decodes a contiguous
        span of rows in place when every other row of the span is idle (it then
        decodes zeros, which cannot matter); otherwise its rows' decoder state is
        gathered into a copy and written back.
        """
        idle = [self._idle_row(row) for row in self._rows]
        # Pipelined: at most decode_budget frames per call, so that with many streams
        # each one's audio still comes in small pieces, often.
        waiting = sum(1 for row in self._rows if row.pending)
        cap = max(1, min(self.decode_chunk, self.decode_budget // max(1, waiting)))
        by_count: dict[int, list[int]] = {}
        for index, row in enumerate(self._rows):
            count = self._due(row, hurry, cap)
            if count:
                by_count.setdefault(count, []).append(index)
        groups = []
        tasks = []
        for count, rows in by_count.items():
            per_task = max(1, TASK_FRAMES // count)
            tasks += [(count, rows[i : i + per_task]) for i in range(0, len(rows), per_task)]
        for count, rows in tasks:
            lo, hi = rows[0], rows[-1] + 1
            members = set(rows)
            in_place = all(i in members or idle[i] for i in range(lo, hi))
            span_rows = list(range(lo, hi)) if in_place else rows
            latents = torch.zeros(len(span_rows), count, self.model.geometry.latent_dim)
            for k, index in enumerate(span_rows):
                if index in members:
                    latents[k] = torch.stack(self._rows[index].pending[:count])
            groups.append(_DecodeGroup(rows, [self._rows[i].stream_id for i in rows],
                                       [self._rows[i].starts[0] for i in rows], latents,
                                       slice(lo, hi) if in_place else None))
            for index in rows:
                row = self._rows[index]
                row.decoded += count
                row.in_flight += count if self.pipelined else 0
                row.pending, row.starts = row.pending[count:], row.starts[count:]
        return groups

    @torch.no_grad()
    def _decode(self, groups: list[_DecodeGroup]) -> dict[int, np.ndarray]:
        """Mimi-decode every group, one call each; {stream_id: pcm of its frames}."""
        out = {}
        for group in groups:
            out.update(self._decode_group(group))
        return out

    @torch.no_grad()
    def _decode_group(self, group: _DecodeGroup) -> dict[int, np.ndarray]:
        """One Mimi call; touches only the decoder state of the group's rows (and idle rows in its span)."""
        flow_lm, mimi = self.model.flow_lm, self.model.mimi
        out = {}
        for index, first in zip(group.rows, group.first, strict=True):
            if first:
                self._mimi.reset_row(index)
        scaled = group.latents * flow_lm.emb_std + flow_lm.emb_mean
        if group.span is not None:
            audio = mimi.decode(scaled, self._mimi.select(group.span))
            offset = group.span.start
            positions = [index - offset for index in group.rows]
        else:
            state = self._mimi.gather(group.rows)
            audio = mimi.decode(scaled, state)
            self._mimi.scatter(group.rows, state)
            positions = list(range(len(group.rows)))
        for position, stream_id, first in zip(positions, group.stream_ids, group.first, strict=True):
            pcm = audio[position].numpy().astype(np.float32, copy=True)
            if first:
                pcm[:FADE_IN_SAMPLES] *= self._fade.numpy()
            out[stream_id] = pcm
        return out

    def _collect(self) -> list[StepOutput]:
        outputs = []
        frame_samples = self.model.frame_samples
        ready = self._ready
        present = {row.stream_id for row in self._rows}
        # audio of rows left out of this step (paused) waits for them
        self._ready = {sid: pcm for sid, pcm in ready.items() if sid not in present}
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
        if self._job is not None:
            self._job.cancel()
            wait([self._job])  # a decode already running ends first; its audio is not wanted
            self._job = None
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
