"""The streaming policy of one dictation stream: VAD gating, partials, finals.

Grammar of the events it produces, per utterance n (in order):
``speech_started(n)``, ``partial(n)*``, then exactly one of ``final(n)`` or
``discarded(n)`` (no words and not closed by finalize/end). A finalize with a
``mark`` is answered by one ``finalized(mark, utterance)`` after the final of
every utterance opened before it (``utterance``: the one it closed, or None).

- Silero VAD runs on every 32 ms window. A few speech windows in a row open an
  utterance (so a click does not); ``silence_ms`` of silence closes it. Audio
  outside utterances is never decoded.
- While an utterance is open its audio is re-decoded every partial step for a
  ``partial`` (partials.py); LocalAgreement fixes its ``stable`` prefix.
- Finals are decoded freely (a forced prefix that already covers all the
  speech makes Whisper invent a continuation), then the stable words are put
  back in front if the free decode disagrees, so ``stable`` never changes.
- When silence begins, the final is decoded speculatively (speculation.py):
  if the silence lasts, its result IS the final; with ``eager`` it goes out
  early as ``eager_final``, and no partial is sent while it stands.
- An utterance longer than ``max_utterance_s`` is cut at its quietest window.
- With a ``turn_threshold``, a pause asks the end-of-turn model once
  (turn_ending.py); a confident answer closes the utterance at the eager point.

This module finds the utterances and hands out their decodes; closed ones wait
for their finals in finals.py. Every figure is a ``PolicyTuning`` knob (tuning.py).
Pure logic, no threads, no I/O: the sidecar's main thread owns every instance;
decodes go out as ``DecodeJob`` snapshots and come back through ``on_result``.
Sample positions are absolute on the stream's 16 kHz clock.
Longer than 300 lines: an utterance's life (open, pause, close) and the decodes
it hands out read and change the same few fields; split apart, each would reach
into the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .agreement import Agreement, split_words
from .decoder import FULL_WINDOW_FRAMES, Transcript, short_window_frames
from .finals import PendingFinals
from .framing import SAMPLE_RATE as RATE
from .framing import samples
from .partials import Partials
from .speculation import Speculation
from .stream_audio import StreamAudio
from .tuning import PolicyTuning
from .turn_ending import TurnEnding
from .turn_judge import TurnQuestion
from .utterance import ClosedUtterance, DecodeJob, OpenUtterance, StreamOptions
from .vad import WINDOW, StreamingVad

__all__ = ["RATE", "DecodeJob", "PolicyTuning", "StreamOptions", "StreamPolicy"]


class StreamPolicy:
    """``vad``: anything with ``feed(samples) -> iterable of (window_start, probability)`` (Silero)."""

    def __init__(self, stream: str, options: StreamOptions, vad: Any = None,
                 tuning: PolicyTuning | None = None) -> None:
        self.stream = stream
        self.options = options
        self.eager = options.eager  # its speculative finals are an agent's end of turn (scheduler.py)
        self.tuning = tuning or PolicyTuning()
        self.vad = vad if vad is not None else StreamingVad(options.offset)
        self.pos = options.offset
        self.audio = StreamAudio(options.offset)
        self._speech_run, self._run_start = 0, 0  # speech windows in a row while no utterance is open
        self._next_index = options.first_utterance
        self._carry_stable = options.stable
        self._prev_end = options.offset
        self.utterance: OpenUtterance | None = None
        context_words = self.tuning.agent_context_words if options.eager else self.tuning.context_words
        self.finals = PendingFinals(stream, options.word_timestamps, options.prompt, context_words, options.terms)
        self.speculation = Speculation(stream, options, self.tuning, self.finals.context)
        self.partials = Partials(stream, options, self.tuning)
        self.turns = TurnEnding(stream, options.turn_threshold, samples(self.tuning.turn_question_after_s),
                                self.speculation.ends_turn_after)
        self.ending = False
        self.lag_s = 0.0
        self._ready_at = 0.0
        self.audio_samples = 0
        self.partial_step = samples(self.tuning.partial_step_s)  # the scheduler stretches it under load

    # ---- audio in

    def feed(self, chunk: np.ndarray, now: float) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if len(chunk) == 0:
            return events
        self.audio.append(chunk)
        self.pos += len(chunk)
        self.audio_samples += len(chunk)
        self._ready_at = now
        for start, prob in self.vad.feed(chunk):
            self._on_window(start, prob, now, events)
        u = self.utterance
        if u is not None:
            self.partials.on_audio(u, self.pos, self.partial_step, now)
        idle_keep = samples(self.tuning.speech_pad_s) + WINDOW * 4  # the leading pad of the next utterance
        self.audio.drop_before(u.start if u is not None else self.pos - idle_keep)
        events.extend(self.finals.flush(self.lag_s))  # a speculative result may already answer a close
        return events

    def _on_window(self, start: int, prob: float, now: float, events: list[dict[str, Any]]) -> None:
        t, u = self.tuning, self.utterance
        if u is None:
            if prob >= t.speech_threshold:
                if self._speech_run == 0:
                    self._run_start = start
                self._speech_run += 1
                if self._speech_run >= t.open_windows:
                    self._open(self._run_start, events)
            elif prob < t.silence_threshold:
                self._speech_run = 0
            return
        u.probs.append((start, prob))
        if prob >= t.speech_threshold:
            if u.silence_since is not None:
                u.silence_since = None
                events.extend(self.speculation.drop(u, start))
        elif prob < t.silence_threshold and u.silence_since is None:
            u.silence_since = start
        if u.silence_since is not None:
            silent = start + WINDOW - u.silence_since
            events.extend(self.speculation.on_silence(u, silent, now))
            ended = self.turns.on_silence(u, self.speculation.generation, silent, self.audio.slice, start + WINDOW)
            if ended or silent >= self.options.silence_ms * RATE // 1000:
                self._end_turn(u, start + WINDOW, now)
                return
        if start + WINDOW - u.start > samples(t.max_utterance_s):
            self._force_cut(now, events)

    def _open(self, speech_start: int, events: list[dict[str, Any]]) -> None:
        start = max(speech_start - samples(self.tuning.speech_pad_s), self.audio.start, self._prev_end)
        committed, self._carry_stable = split_words(self._carry_stable), ""
        self._speech_run = 0
        self._begin(start, speech_start, committed, self.options.language, [], events)

    def _begin(self, start: int, speech_start: int, committed: list[str], language: str | None,
               probs: list[tuple[int, float]], events: list[dict[str, Any]]) -> None:
        """The next utterance opens: its audio from ``start``, its speech from ``speech_start``."""
        u = self.utterance = OpenUtterance(index=self._next_index, start=start, speech_start=speech_start,
                                           agreement=Agreement(committed, self.tuning), language=language,
                                           probs=probs)
        self._next_index += 1
        self.partials.start(speech_start)
        events.append({"ev": "speech_started", "stream": self.stream, "utterance": u.index,
                       "at": round(speech_start / RATE, 3), "start_sample": start})

    def _end_turn(self, u: OpenUtterance, pos: int, now: float) -> None:
        """The pause has ended the turn (the silence window, or the turn model at ``pos``)."""
        assert u.silence_since is not None
        self._close(min(u.silence_since + samples(self.tuning.speech_pad_s), pos), u.silence_since, now,
                    forced=False, endpointed=True, audio_end=u.silence_since + self.speculation.tail)

    def on_turn(self, question: TurnQuestion, probability: float | None, now: float) -> list[dict[str, Any]]:
        """The end-of-turn model's answer to ``question`` (None: it gave none)."""
        u = self.utterance
        silent = self.pos - u.silence_since if u is not None and u.silence_since is not None else 0
        if not self.turns.answer(question, probability, u, self.speculation.generation, silent):
            return []
        assert u is not None
        self._end_turn(u, self.pos, now)
        return self.finals.flush(self.lag_s)

    def _close(self, end: int, speech_end: int, now: float, *, forced: bool, endpointed: bool = False,
               keep_stable: bool = True, audio_end: int | None = None) -> None:
        """``end``: where the next utterance may start; ``audio_end``: where the audio
        its final decodes ends (default ``end``)."""
        u = self.utterance
        assert u is not None
        self.utterance = None
        self._prev_end = end
        closed = ClosedUtterance(index=u.index, start=u.start, speech_start=u.speech_start, end=speech_end, cut=end,
                                 stable=u.agreement.stable if keep_stable else "", language=u.language,
                                 forced=forced, endpointed=endpointed, since=now, audio=None, heard=u.agreement.latest,
                                 turn_confidence=self.turns.heard(u.index, self.speculation.generation))
        if not self.speculation.hand_over(closed):
            closed.audio = self.audio.slice(u.start, end if audio_end is None else min(end, audio_end))
        self.speculation.reset()
        self.finals.add(closed)

    def _force_cut(self, now: float, events: list[dict[str, Any]]) -> None:
        u = self.utterance
        assert u is not None
        earliest = u.start + samples(self.tuning.min_cut_part_s)
        candidates = [(p, -s) for s, p in u.probs if earliest <= s <= self.pos - RATE]
        cut = (-min(candidates)[1] + WINDOW // 2) if candidates else self.pos
        # a speculative decode may reach past the cut: never let it stand for the first part
        events.extend(self.speculation.drop(u, cut))
        self._close(cut, cut, now, forced=False, keep_stable=False)
        self._begin(cut, cut, [], u.language, [(s, p) for s, p in u.probs if s >= cut], events)

    def finalize(self, now: float, mark: str | None = None) -> None:
        """Close the open utterance now; its final comes even if it holds no words.
        A ``mark`` is answered by a ``finalized`` event once every earlier final is out."""
        u = self.utterance
        if mark is not None:
            self.finals.add_mark(mark, u.index if u is not None else None, self._next_index - 1)
        if u is None:
            return
        if u.silence_since is None:  # still speaking: a speculation's audio would miss the latest speech
            self.speculation.reset()
        self._close(self.pos, self.pos if u.silence_since is None else u.silence_since, now, forced=True)

    def end(self, now: float) -> None:
        self.finalize(now)
        self.ending = True

    # ---- scheduling (the sidecar's scheduler asks; see scheduler.py)

    def due_final(self) -> float | None:
        """When this stream's oldest undispatched final became due: a closed utterance's,
        or the speculative final once the pause has ended the turn."""
        closed = self.finals.oldest_undispatched()
        return closed.since if closed is not None else self._speculation_due(turn_ended=True)

    def due_early_final(self) -> float | None:
        """When the speculative final of a pause too short yet to end the turn became
        due (the scheduler runs it on a lane nothing else wants; if the pause lasts
        it is a due final)."""
        undispatched = self.finals.oldest_undispatched() is not None
        return None if undispatched else self._speculation_due(turn_ended=False)

    def _speculation_due(self, *, turn_ended: bool) -> float | None:
        spec = self.speculation
        return spec.due if self.utterance is not None and spec.turn_ended == turn_ended else None

    def due_partial(self) -> float | None:
        """When this stream's pending partial became due (None: none, or not now)."""
        return self.partials.due_since(self.utterance) if self.utterance is not None else None

    def waiting_since(self) -> float | None:
        """When the most urgent undispatched decode of this stream became due."""
        times = [t for t in (self.due_final(), self.due_early_final(), self.due_partial()) if t is not None]
        return min(times) if times else None

    @property
    def talking(self) -> bool:
        """In an utterance that wants partials (speech, not its trailing silence)."""
        u = self.utterance
        return u is not None and self.options.interim and u.silence_since is None

    def take_final(self) -> DecodeJob | None:
        closed = self.finals.take()
        if closed is not None:
            assert closed.audio is not None
            return self._job("final", closed.index, closed.audio, closed.start, closed.language, -1, heard=closed.heard)
        u = self.utterance
        if u is None or self.speculation.due is None:
            return None
        end = self.speculation.take(u, self.pos)
        return self._job("final", u.index, self.audio.slice(u.start, end), u.start, u.language,
                         self.speculation.generation, heard=u.agreement.latest)

    def _job(self, kind: str, utterance: int, audio: np.ndarray, start: int, language: str | None,
             generation: int, prefix: str = "", heard: str = "") -> DecodeJob:
        final = kind == "final"  # a partial: its stable words forced, the short window, no word timings
        return DecodeJob(self.stream, kind, utterance, audio, start, start + len(audio), language, prefix,
                         self.tuning.final_beam if final else self.tuning.partial_beam,
                         final and self.options.word_timestamps, generation, self._ready_at,
                         full_window=final and self.options.full_window_finals,
                         margin_s=self.tuning.final_margin_s if final else self.tuning.short_window_margin_s,
                         prompt=self.finals.context.prompt_for(heard))  # vocabulary and recent text (context.py)

    def final_window(self) -> int | None:
        """The encoder window (frames) of the final ``take_final`` would hand out: finals
        are batched only with finals of the same window, so that a final decodes the same
        alone or in a batch."""
        closed = self.finals.oldest_undispatched()
        if closed is not None:
            assert closed.audio is not None
            return self._final_frames(len(closed.audio))
        u = self.utterance
        if u is None or self.speculation.due is None:
            return None
        return self._final_frames(self.speculation.audio_end(u, self.pos) - u.start)

    def _final_frames(self, length: int) -> int:
        full = self.options.full_window_finals
        return FULL_WINDOW_FRAMES if full else short_window_frames(length, self.tuning.final_margin_s)

    def take_partial(self) -> DecodeJob | None:
        if self.due_partial() is None:
            return None
        u = self.utterance
        assert u is not None
        self.partials.take(self.pos)
        return self._job("partial", u.index, self.audio.slice(u.start, self.pos), u.start, u.language,
                         self.speculation.generation, u.agreement.stable)

    def take_job(self) -> DecodeJob | None:
        """The most urgent job: finals before partials."""
        return self.take_final() or self.take_partial()

    # ---- results

    def on_result(self, job: DecodeJob, result: Transcript, now: float) -> list[dict[str, Any]]:
        self.lag_s = max(0.0, now - job.audio_ready_at)
        events: list[dict[str, Any]] = []
        u = self.utterance
        if job.kind == "partial":
            if u is not None and u.index == job.utterance:
                events.extend(self.partials.on_result(u, job, result, self.lag_s,
                                                      shown=not self.speculation.eager_sent))
        elif job.generation != -1 and u is not None and u.index == job.utterance:
            events.extend(self.speculation.on_result(u, job, result))
        else:
            self.finals.answer(job, result)  # its own final, or a speculation that became it while it ran
        events.extend(self.finals.flush(self.lag_s))
        return events

    def settle(self) -> list[dict[str, Any]]:
        """Finals whose results are already known (e.g. a speculative decode done before the close)."""
        return self.finals.flush(self.lag_s)

    @property
    def done(self) -> bool:
        """Ending and nothing left to send."""
        return self.ending and self.finals.empty and self.utterance is None

    @property
    def utterances(self) -> int:
        return self._next_index - self.options.first_utterance
