"""One utterance, spoken sentence by sentence (the ``TtsStream`` of OmniVoice).

OmniVoice is not autoregressive: a sentence's audio exists only once the whole
sentence is generated. So the utterance is cut into sentences; each one is a
job on the engine's worker, and its audio is cut into 80 ms frames that are
yielded at once. As soon as sentence n is done, sentence n+1 is queued, so it
generates while n plays (one sentence ahead per stream, which keeps the worker
fair between sessions).

``cancel()`` drops the queued sentence (its job never runs) and ends
``frames()`` at the next frame boundary, or at once while it waits for a
sentence; a sentence already generating finishes on the worker and is thrown
away, so cancellation takes effect between sentences at the latest.

Concurrency: ``frames()`` is consumed by one task; ``cancel()`` is called on the
same event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from engines.base import EngineError
from engines.timing import SpokenMark


def cut_frames(audio: np.ndarray, frame_samples: int) -> Iterator[np.ndarray]:
    """``audio`` (clipped to [-1, 1], float32) in frames of ``frame_samples``; the last may be shorter."""
    samples = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
    for start in range(0, len(samples), frame_samples):
        yield samples[start:start + frame_samples]


class SentenceStream:
    """Frames of ``sentences``; ``run(i)`` makes sentence i's audio on the worker thread."""

    def __init__(self, sentences: list[str], run: Callable[[int], np.ndarray],
                 submit: Callable[[Callable[[], Any]], Future[Any]], frame_samples: int, timeout_s: float,
                 on_close: Callable[[], None], text: str | None = None) -> None:
        if not sentences:
            raise ValueError("a stream needs at least one sentence")
        self.sentences = sentences
        # TimedStream: a mark at each sentence's end (``text``: what the sentences were cut from)
        self.marks: list[SpokenMark] = []
        self.word_exact = False
        self._sentence_ends = sentence_ends(text, sentences) if text is not None else []
        self._run, self._submit = run, submit
        self.frame_samples, self.timeout_s = frame_samples, timeout_s
        self._on_close: Callable[[], None] | None = on_close
        self._cancelled = False
        self._cancel_event = asyncio.Event()
        self._pending: Future[Any] | None = None
        self.sentences_done = 0
        self.frames_yielded = 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._cancel_event.set()
        if self._pending is not None:
            self._pending.cancel()  # a queued sentence is dropped; a running one cannot be stopped
        if self._pending is None or self._pending.cancelled():
            self._close()

    async def frames(self) -> AsyncIterator[np.ndarray]:
        try:
            if self._cancel_event.is_set():
                return
            pending = self._pending = self._queue(0)
            made = 0
            for index in range(len(self.sentences)):
                audio = await self._wait(pending)
                self._pending = None
                if audio is None:
                    return
                self.sentences_done += 1
                made += len(audio)
                if index < len(self._sentence_ends):
                    self.marks.append(SpokenMark(self._sentence_ends[index], made))
                if index + 1 < len(self.sentences):
                    pending = self._pending = self._queue(index + 1)  # generates while this one plays
                for frame in cut_frames(audio, self.frame_samples):
                    if self._cancel_event.is_set():  # cancel() ran while the consumer held the last frame
                        return
                    self.frames_yielded += 1
                    yield frame
        finally:
            if self._pending is not None:
                self._pending.cancel()
                self._pending = None
            self._close()

    def _queue(self, index: int) -> Future[Any]:
        return self._submit(lambda: self._run(index))

    async def _wait(self, future: Future[Any]) -> np.ndarray | None:
        """The sentence's audio; None once cancelled. Engine errors and the timeout raise."""
        result = asyncio.wrap_future(future)
        result.add_done_callback(_consume)
        cancelled = asyncio.ensure_future(self._cancel_event.wait())
        try:
            done, _ = await asyncio.wait({result, cancelled}, timeout=self.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if self._cancelled:
            return None
        if result not in done:
            future.cancel()
            raise EngineError(f"OmniVoice produced no audio for a sentence in {self.timeout_s:g} s",
                              code="engine_timeout")
        exc = result.exception()
        if exc is None:
            audio: np.ndarray = result.result()
            return audio
        if isinstance(exc, EngineError):
            raise exc
        raise EngineError(f"OmniVoice failed on a sentence: {exc}", code="engine_error") from exc

    def _close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def sentence_ends(text: str, sentences: list[str]) -> list[int]:
    """Where each sentence ends in ``text`` (each is a slice of it, in order); the last
    one ends the text. Empty when a sentence is not found (no mark beats a wrong one)."""
    ends, at = [], 0
    for sentence in sentences:
        found = text.find(sentence.strip(), at)
        if found < 0:
            return []
        at = found + len(sentence.strip())
        ends.append(at)
    ends[-1] = len(text)
    return ends


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a result nobody may wait for any more, so asyncio does not log it as lost."""
    if not future.cancelled():
        future.exception()
