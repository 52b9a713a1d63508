"""One Piper utterance: sentences synthesized one ahead, cut into 80 ms frames.

The first pool job phonemizes the whole text (Piper splits it into sentences
as it goes) and synthesizes the first sentence. As soon as a sentence's audio
exists its frames are handed out, and the next sentence is submitted at once,
so it is generated while the current one plays. Its deadline in the pool is
the moment a listener who started at the first audio would run out of audio,
which lets the first sentence of a new utterance overtake it. A sentence
spreads over every core when it has the pool to itself (nothing else running
or waiting), a prefetched one too: that is when a lone listener gets the rest
of a long text soonest, and a request that comes in meanwhile takes the other
worker at once and shares the cores only until that sentence's decoder halves
are done.

``cancel()`` stops at the next frame boundary: a sentence still waiting in the
pool never runs, one being synthesized finishes on its worker and is dropped,
and a pending ``frames()`` wakes at once.

Each sentence's words are marked (``marks``, engines.timing.TimedStream) from
the model's own phoneme durations before its frames are handed out, when the
voice's graph gives them (alignment.py).

Concurrency contract: ``frames()`` is consumed by one task on one event loop;
``cancel()`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import numpy as np

from engines.base import EngineError, EngineUnavailable
from engines.piper.alignment import PiperTimeline
from engines.piper.model import Synthesizer, TimedSynthesizer
from engines.piper.pool import DeadlinePool, PoolClosed, PoolFull
from engines.timing import SpokenMark

_CANCELLED = object()
Timed = tuple[np.ndarray, "list[SpokenMark] | None"]  # a sentence's audio and its word marks


def cut_frames(audio: np.ndarray, frame_samples: int) -> Iterator[np.ndarray]:
    """``audio`` in frames of ``frame_samples``; the last one may be shorter."""
    for start in range(0, len(audio), frame_samples):
        yield audio[start:start + frame_samples]


class PiperStream:
    """The ``TtsStream`` of the Piper engine (see module docstring)."""

    def __init__(self, pool: DeadlinePool, synthesizer: Callable[[], Synthesizer], text: str, *,
                 out_rate: int, frame_samples: int, speaker: str | None = None, job_timeout_s: float = 60.0,
                 on_close: Callable[[], None] | None = None) -> None:
        self._pool = pool
        self._synthesizer = synthesizer  # called on a worker: may load the voice the first time
        self.text = text
        self.out_rate = out_rate
        self.frame_samples = frame_samples
        self.speaker = speaker
        self.job_timeout_s = job_timeout_s
        self._on_close = on_close
        self._closed = False
        self._close_lock = threading.Lock()
        self._cancelled = threading.Event()
        self._job: concurrent.futures.Future[Any] | None = None
        self._waiter: asyncio.Future[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sentences = 0  # how many sentences the text has (known after the first job)
        self.synthesized = 0  # sentences whose audio is ready
        self.marks: list[SpokenMark] = []  # TimedStream: grows before the frames it describes
        self.word_exact = False  # turns true with the first sentence the model timed
        self._timeline: PiperTimeline | None = None  # made by the first job, used by each job in turn

    def is_cancelled(self) -> bool:
        # a method, not a property: the flag flips under the caller's feet (another thread may cancel)
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Stop at the next frame boundary; ``frames()`` then ends. Idempotent, any thread."""
        self._cancelled.set()
        job = self._job
        if job is not None:
            job.cancel()  # a no-op once a worker runs it
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._wake)
        self._release()

    async def frames(self) -> AsyncIterator[np.ndarray]:
        self._loop = asyncio.get_running_loop()
        try:
            if self.is_cancelled():
                return
            opened = time.monotonic()
            first = await self._run(self._first_sentence, deadline=opened)
            if first is _CANCELLED:
                return
            sentences, timed = first
            self.sentences = len(sentences) + (timed is not None)
            first_audio_at = time.monotonic()
            ahead_s = 0.0
            offset = 0
            while timed is not None:
                audio, marks = timed
                if marks:
                    self.marks.extend(m.moved(offset) for m in marks)
                    self.word_exact = True
                self.synthesized += 1
                offset += len(audio)
                ahead_s += len(audio) / self.out_rate
                following = sentences.pop(0) if sentences else None
                if following is not None:
                    deadline = first_audio_at + ahead_s
                    self._submit(self._sentence_job(following), deadline=deadline)
                for frame in cut_frames(audio, self.frame_samples):
                    if self.is_cancelled():
                        return
                    yield frame
                if following is None or self.is_cancelled():
                    return
                timed = await self._wait()
                if timed is _CANCELLED:
                    return
        finally:
            job = self._job
            if job is not None:
                job.cancel()
            self._release()

    # ---- jobs (run on the pool's threads)

    def _first_sentence(self) -> tuple[list[list[int]], Timed | None]:
        synth = self._synthesizer()
        sentences = synth.phonemize(self.text)
        if not sentences or self.is_cancelled():
            return [], None
        if isinstance(synth, TimedSynthesizer) and synth.word_gap_id is not None:
            self._timeline = PiperTimeline(self.text, len(sentences), synth.word_gap_id, synth.quiet_ids,
                                           synth.phoneme_count)
        return sentences[1:], self._infer(synth, sentences[0])

    def _sentence_job(self, phoneme_ids: Sequence[int]) -> Callable[[], Timed | None]:
        def job() -> Timed | None:
            if self.is_cancelled():
                return None
            return self._infer(self._synthesizer(), phoneme_ids)

        return job

    def _infer(self, synth: Synthesizer, phoneme_ids: Sequence[int]) -> Timed:
        """The sentence's audio at ``out_rate``, and its word marks (samples from its start; None
        when the voice does not time its phonemes)."""
        speaker_id = synth.speakers.get(self.speaker) if self.speaker else None
        # Every core only while nothing else runs or waits: beside other work, spread threads would
        # fight it for the cores (VITS parallelises poorly inside one call).
        wide = self._pool.alone()
        id_samples = None
        if isinstance(synth, TimedSynthesizer):
            audio, id_samples = synth.infer_timed(phoneme_ids, speaker_id, wide=wide)
        else:
            audio = synth.infer(phoneme_ids, speaker_id, wide=wide)
        marks = None
        if self._timeline is not None and id_samples is not None:
            scale = self.out_rate / synth.sample_rate
            marks = [m.moved(scale=scale) for m in self._timeline.sentence_marks(phoneme_ids, id_samples.tolist())]
        if synth.sample_rate != self.out_rate:
            import soxr

            audio = soxr.resample(audio, synth.sample_rate, self.out_rate).astype(np.float32)
        return audio, marks

    # ---- plumbing between the pool and the event loop

    async def _run(self, fn: Callable[[], Any], deadline: float) -> Any:
        self._submit(fn, deadline)
        return await self._wait()

    def _submit(self, fn: Callable[[], Any], deadline: float) -> None:
        loop = self._loop
        assert loop is not None
        waiter: asyncio.Future[Any] = loop.create_future()
        try:
            job = self._pool.submit(fn, deadline)
        except PoolFull as exc:
            raise EngineError(f"Piper is busy: {exc}; try again shortly", code="over_capacity") from None
        except PoolClosed as exc:
            raise EngineUnavailable(str(exc), engine="piper") from None
        self._job, self._waiter = job, waiter

        def settle(done: concurrent.futures.Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, waiter, done)

        job.add_done_callback(settle)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(_CANCELLED)

    async def _wait(self) -> Any:
        waiter = self._waiter
        assert waiter is not None
        try:
            result = await asyncio.wait_for(waiter, self.job_timeout_s)
        except asyncio.TimeoutError:
            raise EngineError(f"Piper produced no audio for {self.job_timeout_s:g} s",
                              code="engine_timeout") from None
        if result is None or self.is_cancelled():
            return _CANCELLED
        return result

    def _release(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._on_close is not None:
            self._on_close()


def _settle(waiter: asyncio.Future[Any], job: concurrent.futures.Future[Any]) -> None:
    if waiter.done():
        return
    if job.cancelled():
        waiter.set_result(_CANCELLED)
        return
    exc = job.exception()
    if exc is None:
        waiter.set_result(job.result())
    elif isinstance(exc, EngineError):
        waiter.set_exception(exc)
    else:
        waiter.set_exception(EngineError(f"Piper failed on this text: {exc.__class__.__name__}: {exc}",
                                         code="engine_error"))
