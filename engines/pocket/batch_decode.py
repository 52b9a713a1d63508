"""A batch's accepted latents turned into audio by Mimi, a few frames per call.

:class:`BatchDecoder` owns Mimi's per-row decoder state and the audio decoded but
not yet returned. After each LM step the batch (``engines.pocket.batch``) hands it
its rows: each queues its accepted latents (``pending``) and marks those that start
a text chunk (``starts``: the decoder restarts there and the audio fades in).

Chunked decoding (``decode_chunk=K > 1``): Mimi costs less per frame when it
decodes several at once, so a stream's latents may wait and be decoded K at a time.
A row is decoded as soon as it has K latents waiting, its text chunk or utterance
has ended, it has not yet produced ``eager_frames`` frames (time to first audio is
unchanged), or the caller names it in ``hurry`` (its listener is short of audio).
Mimi decoding is chunk-invariant, so the audio is the same as one frame per call.

Pipelined (``pipelined=True``): Mimi runs on a helper thread owned by the decoder,
on its own core, while the LM keeps stepping. When the helper is free and enough
latents are queued (:meth:`BatchDecoder._worth_a_call`), a step hands it every
latent accepted since its last job (up to ``decode_chunk`` per stream) and returns
whatever the helper has finished, so the LM runs ahead while Mimi decodes several
frames per call. A job is a list of independent decodes (disjoint rows, at most
about ``frames_per_call`` frames each), in two parts: the helper claims decodes from
the front, and when the LM has to wait for the helper (a stream has
``2 * decode_chunk`` latents queued, or nothing is left to step) or finds decodes of
the job not begun after its step (Mimi is behind), the stepping thread claims them
from the back. So with many streams, where Mimi costs more than the LM, both cores
decode; the helper's part is the larger by what the LM step costs
(:func:`engines.pocket.decode_tasks.helper_share`), so that both end together. The
audio is the same; it arrives at least one step later. :meth:`BatchDecoder.close`
stops the helper.

Not thread-safe: the thread that steps the batch owns its decoder (the helper only
runs the decodes it is handed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from engines.pocket.decode_tasks import TASK_FRAMES, DecodeCosts, frames_per_call, split_job
from engines.pocket.decode_tasks import DecodeGroup as _DecodeGroup
from engines.pocket.decode_tasks import DecodeJob as _DecodeJob
from engines.pocket.generation import Utterance

if TYPE_CHECKING:
    from engines.pocket.model import PocketModel

FADE_IN_SAMPLES = 120  # 5 ms: a fresh decoder state starts with a small step, heard as a click

class DecodeRow(Protocol):
    """What the decoder reads and updates on a batch row."""

    stream_id: int
    utterance: Utterance
    pending: list[torch.Tensor]  # accepted latents waiting for Mimi
    starts: list[bool]  # ... which of them start a chunk (fresh decoder, fade in)
    decoded: int  # latents handed to Mimi so far
    in_flight: int  # ... of which the pipelined helper has not returned the audio yet


class BatchDecoder:
    """Mimi decoder state for ``max_streams`` rows, and the audio not yet returned."""

    def __init__(self, model: PocketModel, max_streams: int, pipelined: bool, decode_chunk: int,
                 eager_frames: int, decode_budget: int) -> None:
        self.model = model
        self.pipelined = pipelined
        self.decode_chunk, self.eager_frames, self.decode_budget = decode_chunk, eager_frames, decode_budget
        self.state = model.mimi.new_decoder_state(max_streams)  # row i: the batch's row i
        self.task_frames = frames_per_call(model.geometry.decoder.dimension)
        self.costs = DecodeCosts()  # what the helper's share of a job is sized by
        self._decoder: ThreadPoolExecutor | None = None
        self._job: Future[dict[int, np.ndarray]] | None = None  # the helper's current decode
        self._job_work: _DecodeJob | None = None  # ... its decodes, which this thread may help with
        self._job_rows: list[DecodeRow] = []  # ... and the rows it decodes for
        self._job_eager = False  # ... some of them a stream's first frames
        self._ready: dict[int, list[np.ndarray]] = {}  # decoded audio not yet returned
        self._hurry: set[int] = set()  # the current step's hurried streams (pipelined)
        self._fade = torch.linspace(0, 1, FADE_IN_SAMPLES).numpy()
        self._blank = torch.zeros(model.geometry.latent_dim)  # an idle row's latent in a span

    def decode_due(self, rows: Sequence[DecodeRow], hurry: set[int]) -> None:
        """Sequential: decode the rows' due latents now, on this thread, one Mimi call per group."""
        for group in self._take_pending(rows, hurry):
            self._keep(self._decode_group(group))

    def decode_while(self, advance_lm: Callable[[], bool], rows: Sequence[DecodeRow], hurry: Collection[int]) -> None:
        """Pipelined: run ``advance_lm`` (one LM step; False when nothing was left to
        step) while the helper decodes what the rows have queued."""
        self._hurry = set(hurry)
        self._harvest(wait=False)
        self._start_decode(rows)
        if any(len(row.pending) >= 2 * self.decode_chunk for row in rows):
            self._harvest(wait=True)  # bounded queue: the LM waits for Mimi to catch up
            self._start_decode(rows)
        start = time.perf_counter()
        lm_ran = advance_lm()
        if lm_ran:
            self.costs.add_lm(time.perf_counter() - start)
        if self._job is not None and (self._job_eager or not lm_ran or self._job_work_left()):
            # a stream's first frames are returned by this call (time to first audio);
            # with nothing left for the LM, waiting for the audio is all there is to do;
            # and while the helper has decodes not begun, Mimi is behind the LM: this
            # thread decodes them rather than step ahead and queue more latents
            self._harvest(wait=True)
            self._start_decode(rows)

    def take_ready(self, present: set[int]) -> dict[int, list[np.ndarray]]:
        """The decoded audio of the ``present`` streams, oldest first; the others' waits for them."""
        ready = self._ready
        self._ready = {sid: pcm for sid, pcm in ready.items() if sid not in present}
        return {sid: pcm for sid, pcm in ready.items() if sid in present}

    def discard(self, stream_id: int) -> None:
        """Forget a cancelled stream's audio."""
        self._ready.pop(stream_id, None)

    def settle(self) -> None:
        """Let a running decode finish before Mimi rows are moved."""
        self._harvest(wait=True)

    def close(self) -> None:
        """Stop the helper thread (idempotent)."""
        if self._job is not None:
            self._job.cancel()
            wait([self._job])  # a decode already running ends first; its audio is not wanted
            self._job = None
        if self._decoder is not None:
            self._decoder.shutdown(wait=True)
            self._decoder = None

    def _keep(self, decoded: dict[int, np.ndarray]) -> None:
        for stream_id, pcm in decoded.items():
            self._ready.setdefault(stream_id, []).append(pcm)

    def _job_work_left(self) -> bool:
        return self._job_work is not None and self._job_work.left()

    def _harvest(self, wait: bool) -> None:
        """Take the helper's finished audio (waiting for it if ``wait``)."""
        job = self._job
        if job is None or not (wait or job.done()):
            return
        self._job = None
        work = self._job_work
        try:
            if wait and work is not None:
                self._keep(work.run(from_back=True))  # rather than idle: decode what the helper has not begun
            self._keep(job.result())
            if work is not None:
                for frames, seconds, on_helper in work.timings:
                    self.costs.add_decode(frames, seconds, on_helper)
        finally:
            self._job_work = None
            for row in self._job_rows:
                row.in_flight = 0
            self._job_rows = []

    def _start_decode(self, rows: Sequence[DecodeRow]) -> None:
        """Give the helper everything queued, if it is free."""
        if self._job is not None or not self._worth_a_call(rows):
            return
        groups = self._take_pending(rows, self._hurry)
        if not groups:
            return
        if self._decoder is None:
            self._decoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pocket-mimi")
        self._job_rows = [rows[i] for group in groups for i in group.rows]
        self._job_eager = any(row.decoded - row.in_flight < self.eager_frames for row in self._job_rows)
        self._job_work = _DecodeJob(groups, self._decode_group)
        self._job = self._decoder.submit(self._job_work.run)

    def _worth_a_call(self, rows: Sequence[DecodeRow]) -> bool:
        """Whether to start a decode now, rather than let the latents queue up.

        A call with fewer than ``TASK_FRAMES`` frames costs Mimi nearly twice as much
        per frame, time the LM on the other core loses to the shared memory. So with
        few frames queued (one stream, mostly) the helper waits until some stream has
        a full call's worth (``decode_chunk``, ramping up from one frame over its
        first calls), a text chunk ends, or a stream is hurried.
        """
        if sum(len(row.pending) for row in rows) >= TASK_FRAMES:
            return True
        for row in rows:
            if not row.pending:
                continue
            new_chunk_queued = any(row.starts[1:])
            if (len(row.pending) >= min(self.decode_chunk, max(1, row.decoded)) or new_chunk_queued
                    or row.utterance.chunk_done or row.stream_id in self._hurry):
                return True
        return False

    def _due(self, row: DecodeRow, hurry: set[int], cap: int) -> int:
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

    def _idle_row(self, row: DecodeRow) -> bool:
        """Decoding zeros on this row is harmless: it restarts its decoder next or leaves."""
        return not row.pending and row.utterance.chunk_done

    def _take_pending(self, rows: Sequence[DecodeRow], hurry: set[int]) -> list[_DecodeGroup]:
        """Hand the due latents over (the rows are free for the next LM step).

        Rows are grouped by how many latents they decode. A group decodes a contiguous
        span of rows in place when every other row of the span is idle (it then
        decodes zeros, which cannot matter); otherwise its rows' decoder state is
        gathered into a copy and written back.
        """
        idle = [self._idle_row(row) for row in rows]
        # Pipelined: at most decode_budget frames per call, so that with many streams
        # each one's audio still comes in small pieces, often.
        waiting = sum(1 for row in rows if row.pending)
        cap = max(1, min(self.decode_chunk, self.decode_budget // max(1, waiting)))
        by_count: dict[int, list[int]] = {}
        for index, row in enumerate(rows):
            count = self._due(row, hurry, cap)
            if count:
                by_count.setdefault(count, []).append(index)
        groups = []
        if self.pipelined:
            tasks = self._split_job(by_count)
        else:
            tasks = []
            for count, indices in by_count.items():
                per_task = max(1, self.task_frames // count)
                tasks += [(count, indices[i : i + per_task]) for i in range(0, len(indices), per_task)]
        for count, task_rows in tasks:
            lo, hi = task_rows[0], task_rows[-1] + 1
            members = set(task_rows)
            in_place = all(i in members or idle[i] for i in range(lo, hi))
            span_rows = list(range(lo, hi)) if in_place else task_rows
            blank = [self._blank] * count
            latents = torch.stack([latent for index in span_rows
                                   for latent in (rows[index].pending[:count] if index in members else blank)])
            groups.append(_DecodeGroup(task_rows, [rows[i].stream_id for i in task_rows],
                                       [rows[i].starts[0] for i in task_rows],
                                       latents.view(len(span_rows), count, -1),
                                       slice(lo, hi) if in_place else None))
            for index in task_rows:
                row = rows[index]
                row.decoded += count
                row.in_flight += count if self.pipelined else 0
                row.pending, row.starts = row.pending[count:], row.starts[count:]
        return groups

    def _split_job(self, by_count: dict[int, list[int]]) -> list[tuple[int, list[int]]]:
        """A pipelined job's decodes (count, rows): the helper's part first (:func:`split_job`)."""
        units = [(count, index) for count, indices in by_count.items() for index in indices]
        return split_job(units, self.costs.helper_share(sum(count for count, _ in units)), self.task_frames)

    @torch.no_grad()
    def _decode_group(self, group: _DecodeGroup) -> dict[int, np.ndarray]:
        """One Mimi call; touches only the decoder state of the group's rows (and idle rows in its span)."""
        flow_lm, mimi = self.model.flow_lm, self.model.mimi
        out = {}
        for index, first in zip(group.rows, group.first, strict=True):
            if first:
                self.state.reset_row(index)
        scaled = group.latents * flow_lm.emb_std + flow_lm.emb_mean
        if group.span is not None:
            audio = mimi.decode(scaled, self.state.select(group.span))
            offset = group.span.start
            positions = [index - offset for index in group.rows]
        else:
            state = self.state.gather(group.rows)
            audio = mimi.decode(scaled, state)
            self.state.scatter(group.rows, state)
            positions = list(range(len(group.rows)))
        samples = audio.numpy()
        for position, stream_id, first in zip(positions, group.stream_ids, group.first, strict=True):
            pcm = samples[position].astype(np.float32, copy=True)
            if first:
                pcm[:FADE_IN_SAMPLES] *= self._fade
            out[stream_id] = pcm
        return out
