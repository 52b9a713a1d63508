"""The streaming policy of one dictation stream: VAD gating, partials, finals.

Grammar of the events it produces, per utterance n (in order):
``speech_started(n)``, ``partial(n)*``, then exactly one of ``final(n)`` or
``discarded(n)`` (no words and not closed by finalize/end). A finalize with a
``mark`` is answered by one ``finalized(mark, utterance)`` after the final of
every utterance opened before it (``utterance``: the one it closed, or None).

- Silero VAD runs on every 32 ms window. An utterance opens after ~100 ms of
  speech (so a click does not open one) and closes after ``silence_ms`` of
  silence. Audio outside utterances is never decoded.
- While an utterance is open its audio is re-decoded about every 0.5 s
  (beam 5) for a ``partial``; LocalAgreement-3 fixes the ``stable`` prefix,
  which is then forced as the decoder prefix so later hypotheses keep it.
- Finals are decoded freely (a forced prefix that already covers all the
  speech makes Whisper invent a continuation), then the stable words are put
  back in front if the free decode disagrees, so ``stable`` never changes.
- When silence begins, a final decode (beam 5) starts speculatively; if the
  silence lasts, its result IS the final, so end-of-speech to final costs about
  the silence window rather than silence + queue + decode. Speech resuming
  discards it (a generation counter).
- With ``eager``, that speculative result goes out as ``eager_final`` (when it
  has words) once the silence has lasted 160 ms, or as soon as it is decoded if
  that is later; speech resuming after it sends ``turn_resumed``, and no
  partial is sent while it stands. The final repeats its text.
- An utterance longer than ~25 s is cut at its quietest window.

Pure logic: no threads, no I/O. The sidecar's main thread owns every instance;
decodes are handed out as ``DecodeJob`` snapshots and come back through
``on_result``. Sample positions are absolute on the stream's 16 kHz clock.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from .agreement import Agreement, keep_stable_words, split_words
from .decoder import FULL_WINDOW_FRAMES, Transcript, short_window_frames
from .utterance import ClosedUtterance, DecodeJob, OpenUtterance, StreamOptions
from .vad import WINDOW, StreamingVad

__all__ = ["RATE", "DecodeJob", "StreamOptions", "StreamPolicy"]

RATE = 16000
THRESHOLD = 0.5
NEG_THRESHOLD = 0.35
OPEN_WINDOWS = 3  # ~100 ms of speech opens an utterance
PAD = int(0.4 * RATE)  # speech pad on both sides of an utterance
PARTIAL_STEP = int(0.5 * RATE)
MAX_UTTERANCE = int(25 * RATE)
DETECT_LANGUAGE_AFTER = int(2 * RATE)  # a language detected on less audio is not trusted for the utterance
MIN_CUT_OFFSET = int(5 * RATE)  # a forced cut leaves at least this much in the first part
IDLE_KEEP = PAD + WINDOW * 4  # audio kept while idle, for the leading pad
FINAL_BEAM = 5
# The speculative final starts at the first silent VAD window; its result counts as the
# end of a turn (eager_final) only once the silence has lasted SPECULATE_AFTER_S. Starting
# it then rather than at the 160 ms mark has it decoded ~0.13 s sooner, and under load
# the streams that stop together queue for the lanes that much earlier; on the
# benchmark's 64 clips it cost 40% more speculative decodes (pauses shorter than 160 ms
# waste one) and no word errors (421 against 419 over three renditions, bench/asr_variants.py).
# On the 30 s window (finals of streams without eager, by default) a final costs ~5x a
# short-window one, and a pause shorter than 160 ms would waste that much of a lane:
# those streams speculate from the 160 ms mark. Their finals wait for the silence
# window anyway: at one stream they came ~0.04 s after it (final p50 0.64 s against 0.60 s).
SPECULATE_FROM_S = 0.032
SPECULATE_AFTER_S = 0.16
# Beam 5 on partials too: committed words are forced on every later decode and kept
# in the final, so a greedy slip becomes a final error (streaming WER 0.25 vs 0.21
# on the benchmark clips); on the short window it costs only ~10% more.
PARTIAL_BEAM = 5
# No partial is decoded while the speaker pauses: the speculative final covers the same
# audio. True brings them back (bench/asr_variants.py measures both).
PARTIALS_IN_PAUSES = False
# A final decodes the utterance up to this long after its silence began, wherever the
# audio stood when the decode was dispatched: the first silent VAD window is all a
# speculative final has when it starts, and a final taken later under load (or after
# the close) must decode the very same samples, or the load would change its words.
FINAL_TAIL = WINDOW


class StreamPolicy:
    """``vad`` is anything with ``feed(samples) -> iterable of (window_start, probability)``
    (default: Silero); tests script it."""

    def __init__(self, stream: str, options: StreamOptions, vad: Any = None) -> None:
        self.stream = stream
        self.options = options
        self.vad = vad if vad is not None else StreamingVad(options.offset)
        self.pos = options.offset
        self._audio: deque[np.ndarray] = deque()
        self._audio_start = options.offset
        self._audio_len = 0
        self._speech_run = 0
        self._run_start = 0
        self._next_index = options.first_utterance
        self._carry_stable = options.stable
        self._prev_end = options.offset
        self.utterance: OpenUtterance | None = None
        self.closed: deque[ClosedUtterance] = deque()
        # finalize marks waiting for earlier finals: (mark, utterance it closed, last utterance before it)
        self._marks: deque[tuple[str, int | None, int]] = deque()
        self.ending = False
        self.lag_s = 0.0
        self._ready_at = 0.0
        self.audio_samples = 0
        self.partial_step = PARTIAL_STEP  # new audio that makes a partial due; the scheduler stretches it

    # ---- audio in

    def feed(self, samples: np.ndarray, now: float) -> list[dict]:
        events: list[dict] = []
        if len(samples) == 0:
            return events
        self._audio.append(samples)
        self._audio_len += len(samples)
        self.pos += len(samples)
        self.audio_samples += len(samples)
        self._ready_at = now
        for start, prob in self.vad.feed(samples):
            self._on_window(start, prob, now, events)
        u = self.utterance
        if u is not None and self.options.interim and (u.silence_since is None or PARTIALS_IN_PAUSES) \
                and u.partial_due is None \
                and self.pos - u.last_partial_pos >= self.partial_step:
            u.partial_due = now
        self._trim()
        events.extend(self._flush_finals())  # a speculative result may already answer a close
        return events

    def _on_window(self, start: int, prob: float, now: float, events: list[dict]) -> None:
        u = self.utterance
        if u is None:
            if prob >= THRESHOLD:
                if self._speech_run == 0:
                    self._run_start = start
                self._speech_run += 1
                if self._speech_run >= OPEN_WINDOWS:
                    self._open(self._run_start, now, events)
            elif prob < NEG_THRESHOLD:
                self._speech_run = 0
            return
        u.probs.append((start, prob))
        if prob >= THRESHOLD:
            if u.silence_since is not None:
                u.silence_since = None
                self._drop_speculation(u, start, events)
        elif prob < NEG_THRESHOLD and u.silence_since is None:
            u.silence_since = start
        if u.silence_since is not None:
            silent = start + WINDOW - u.silence_since
            if silent >= self._spec_from() and u.spec_due is None and not u.spec_running and u.spec_result is None:
                u.spec_due = now
            if silent >= self._spec_after() and not u.turn_ended:
                u.turn_ended = True
                if self.options.eager and u.spec_result is not None:
                    events.extend(self._eager_final(u, u.spec_result))
            if silent >= self.options.silence_ms * RATE // 1000:
                self._close(min(u.silence_since + PAD, start + WINDOW), u.silence_since, now, forced=False,
                            audio_end=u.silence_since + self._final_tail())
                return
        if start + WINDOW - u.start > MAX_UTTERANCE:
            self._force_cut(now, events)

    def _drop_speculation(self, u: OpenUtterance, at: int, events: list[dict]) -> None:
        """The speculative final no longer stands (speech came back, or a forced cut)."""
        u.generation += 1
        u.spec_due, u.spec_result, u.spec_running, u.turn_ended = None, None, False, False
        if u.eager_sent:
            u.eager_sent = False
            events.append({"ev": "turn_resumed", "stream": self.stream, "utterance": u.index,
                           "at": round(at / RATE, 3)})

    def _final_tail(self) -> int:
        """How far past the start of its silence a final's audio runs: as far as the
        speculation has when it starts (a 30 s window final speculates later, and
        the longer tail there read 96 errors against 101 offline on eight simulated
        renditions of the quick-paced set, where 32 ms read 104)."""
        return self._spec_after() if self.options.full_window_finals else FINAL_TAIL

    def _spec_after(self) -> int:
        return min(int(SPECULATE_AFTER_S * RATE), self.options.silence_ms * RATE // 2000)

    def _spec_from(self) -> int:
        if self.options.full_window_finals:  # no early speculation: see SPECULATE_FROM_S
            return self._spec_after()
        return min(int(SPECULATE_FROM_S * RATE), self._spec_after())

    def _open(self, speech_start: int, now: float, events: list[dict]) -> None:
        start = max(speech_start - PAD, self._audio_start, self._prev_end)
        committed = split_words(self._carry_stable)
        self._carry_stable = ""
        u = OpenUtterance(index=self._next_index, start=start, speech_start=speech_start,
                       agreement=Agreement(committed), language=self.options.language,
                       last_partial_pos=speech_start)
        self._next_index += 1
        self._speech_run = 0
        self.utterance = u
        events.append({"ev": "speech_started", "stream": self.stream, "utterance": u.index,
                       "at": round(speech_start / RATE, 3), "start_sample": start})

    def _close(self, end: int, speech_end: int, now: float, *, forced: bool, keep_stable: bool = True,
               audio_end: int | None = None) -> None:
        """``end``: where the next utterance may start; ``audio_end``: where the audio
        its final decodes ends (default ``end``)."""
        u = self.utterance
        assert u is not None
        self.utterance = None
        self._prev_end = end
        closed = ClosedUtterance(index=u.index, start=u.start, speech_start=u.speech_start, end=speech_end, cut=end,
                         stable=u.agreement.stable if keep_stable else "", language=u.language,
                         forced=forced, since=now, audio=None)
        if u.spec_result is not None:
            closed.result, closed.dispatched = u.spec_result, True
        elif u.spec_running:
            # the running speculative decode answers for it, not an older one still on a lane
            closed.dispatched, closed.awaits = True, u.generation
        else:
            closed.audio = self._slice(u.start, end if audio_end is None else min(end, audio_end))
        self.closed.append(closed)

    def _force_cut(self, now: float, events: list[dict]) -> None:
        u = self.utterance
        assert u is not None
        candidates = [(p, -s) for s, p in u.probs if u.start + MIN_CUT_OFFSET <= s <= self.pos - RATE]
        cut = (-min(candidates)[1] + WINDOW // 2) if candidates else self.pos
        # a speculative decode may reach past the cut: never let it stand for the first part
        self._drop_speculation(u, cut, events)
        self._close(cut, cut, now, forced=False, keep_stable=False)
        u2 = OpenUtterance(index=self._next_index, start=cut, speech_start=cut, agreement=Agreement(),
                        language=u.language, last_partial_pos=cut,
                        probs=[(s, p) for s, p in u.probs if s >= cut])
        self._next_index += 1
        self.utterance = u2
        events.append({"ev": "speech_started", "stream": self.stream, "utterance": u2.index,
                       "at": round(cut / RATE, 3), "start_sample": cut})

    def finalize(self, now: float, mark: str | None = None) -> None:
        """Close the open utterance now; its final comes even if it holds no words.
        A ``mark`` is answered by a ``finalized`` event once every earlier final is out."""
        u = self.utterance
        if mark is not None:
            self._marks.append((mark, u.index if u is not None else None, self._next_index - 1))
        if u is None:
            return
        speech_end = u.silence_since if u.silence_since is not None else self.pos
        if u.silence_since is None:
            u.spec_result, u.spec_running = None, False  # the speculative audio is missing the latest speech
        self._close(self.pos, speech_end, now, forced=True)

    def end(self, now: float) -> None:
        self.finalize(now)
        self.ending = True

    # ---- scheduling (the sidecar's scheduler asks; see scheduler.py)

    def due_final(self) -> float | None:
        """When this stream's oldest undispatched final became due: a closed utterance's,
        or the speculative final once the pause has lasted 160 ms."""
        for c in self.closed:
            if not c.dispatched:
                return c.since
        u = self.utterance
        return u.spec_due if u is not None and u.turn_ended else None

    def due_early_final(self) -> float | None:
        """When the speculative final of a pause not yet 160 ms long became due (the
        scheduler runs it on a lane nothing else wants; if the pause lasts it is a
        due final)."""
        if any(not c.dispatched for c in self.closed):
            return None
        u = self.utterance
        return u.spec_due if u is not None and not u.turn_ended else None

    def due_partial(self) -> float | None:
        """When this stream's pending partial became due (None: none, one is running, or
        the speaker is pausing: the speculative final soon covers the same audio)."""
        u = self.utterance
        if u is None or u.partial_running or (u.silence_since is not None and not PARTIALS_IN_PAUSES):
            return None
        return u.partial_due

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
        for c in self.closed:
            if not c.dispatched:
                c.dispatched = True
                assert c.audio is not None
                return DecodeJob(self.stream, "final", c.index, c.audio, c.start, c.start + len(c.audio),
                                 c.language, "", FINAL_BEAM, self.options.word_timestamps, -1, self._ready_at,
                                 self.options.full_window_finals)
        u = self.utterance
        if u is None or u.spec_due is None:
            return None
        end = self._speculation_end(u)
        u.spec_due, u.spec_running, u.spec_end = None, True, end
        return DecodeJob(self.stream, "final", u.index, self._slice(u.start, end), u.start, end,
                         u.language, "", FINAL_BEAM, self.options.word_timestamps, u.generation, self._ready_at,
                         self.options.full_window_finals)

    def _speculation_end(self, u: OpenUtterance) -> int:
        assert u.silence_since is not None  # a speculation is only due in a pause
        return min(self.pos, u.silence_since + self._final_tail())

    def final_window(self) -> int | None:
        """The encoder window (frames) of the final ``take_final`` would hand out: finals
        are batched only with finals of the same window, so that a final decodes the same
        alone or in a batch."""
        for c in self.closed:
            if not c.dispatched:
                assert c.audio is not None
                return self._final_frames(len(c.audio))
        u = self.utterance
        if u is None or u.spec_due is None:
            return None
        return self._final_frames(self._speculation_end(u) - u.start)

    def _final_frames(self, samples: int) -> int:
        return FULL_WINDOW_FRAMES if self.options.full_window_finals else short_window_frames(samples)

    def take_partial(self) -> DecodeJob | None:
        if self.due_partial() is None:
            return None
        u = self.utterance
        assert u is not None
        u.partial_due, u.last_partial_pos, u.partial_running = None, self.pos, True
        return DecodeJob(self.stream, "partial", u.index, self._slice(u.start, self.pos), u.start, self.pos,
                         u.language, u.agreement.stable, PARTIAL_BEAM, False, u.generation, self._ready_at)

    def take_job(self) -> DecodeJob | None:
        """The most urgent job: finals before partials."""
        return self.take_final() or self.take_partial()

    # ---- results

    def on_result(self, job: DecodeJob, result: Transcript, now: float) -> list[dict]:
        self.lag_s = max(0.0, now - job.audio_ready_at)
        events: list[dict] = []
        u = self.utterance
        if job.kind == "partial":
            if u is not None and u.index == job.utterance:
                u.partial_running = False
            if u is not None and u.index == job.utterance and not u.eager_sent:
                if u.language is None and len(job.audio) >= DETECT_LANGUAGE_AFTER:
                    u.language = result.language  # later decodes of this utterance skip detection
                words = u.agreement.update(split_words(result.text))
                if words:
                    events.append({"ev": "partial", "stream": self.stream, "utterance": u.index,
                                   "text": " ".join(words), "stable": u.agreement.stable,
                                   "start": round(u.speech_start / RATE, 3),
                                   "end": round(job.end_sample / RATE, 3), "lag_s": round(self.lag_s, 3)})
        elif job.generation == -1:
            for c in self.closed:
                if c.index == job.utterance and c.result is None:
                    c.result = result
                    break
        elif u is not None and u.index == job.utterance:
            if job.generation == u.generation and u.spec_running:
                u.spec_running, u.spec_result = False, result
                if self.options.eager and u.turn_ended:
                    events.extend(self._eager_final(u, result))
        else:
            for c in self.closed:  # a speculative decode that became the final while it ran
                if c.index == job.utterance and c.result is None and c.audio is None and c.awaits == job.generation:
                    c.result = result
                    break
        events.extend(self._flush_finals())
        return events

    def _flush_finals(self) -> list[dict]:
        events = []
        while self.closed and self.closed[0].result is not None:
            c = self.closed.popleft()
            r = c.result
            assert r is not None
            if not r.text and not c.stable and not c.forced:
                events.append({"ev": "discarded", "stream": self.stream, "utterance": c.index,
                               "end_sample": c.cut})
                continue
            text, words = keep_stable_words(c.stable, r.text, r.words)
            event = {"ev": "final", "stream": self.stream, "utterance": c.index, "text": text,
                     "start": round(c.speech_start / RATE, 3), "end": round(c.end / RATE, 3),
                     "language": r.language, "lag_s": round(self.lag_s, 3), "end_sample": c.cut}
            if self.options.word_timestamps:
                event["words"] = [w.to_dict() for w in words]
            events.append(event)
        while self._marks and (not self.closed or self.closed[0].index > self._marks[0][2]):
            mark, closed_index, _ = self._marks.popleft()
            events.append({"ev": "finalized", "stream": self.stream, "id": mark, "utterance": closed_index})
        return events

    def _eager_final(self, u: OpenUtterance, r: Transcript) -> list[dict]:
        text, words = keep_stable_words(u.agreement.stable, r.text, r.words)
        if not text:
            return []
        u.eager_sent = True
        speech_end = u.silence_since if u.silence_since is not None else u.spec_end
        event = {"ev": "eager_final", "stream": self.stream, "utterance": u.index, "text": text,
                 "start": round(u.speech_start / RATE, 3), "end": round(speech_end / RATE, 3),
                 "language": r.language}
        if self.options.word_timestamps:
            event["words"] = [w.to_dict() for w in words]
        return [event]

    def settle(self) -> list[dict]:
        """Finals whose results are already known (e.g. a speculative decode done before the close)."""
        return self._flush_finals()

    @property
    def done(self) -> bool:
        """Ending and nothing left to send."""
        return self.ending and not self.closed and self.utterance is None

    @property
    def utterances(self) -> int:
        return self._next_index - self.options.first_utterance

    # ---- audio buffer

    def _slice(self, a: int, b: int) -> np.ndarray:
        if not self._audio:
            return np.zeros(0, dtype=np.float32)
        data = np.concatenate(list(self._audio)) if len(self._audio) > 1 else self._audio[0]
        if len(self._audio) > 1:
            self._audio = deque([data])
        return data[max(0, a - self._audio_start):max(0, b - self._audio_start)].copy()

    def _trim(self) -> None:
        keep_from = self.utterance.start if self.utterance is not None else self.pos - IDLE_KEEP
        while self._audio and self._audio_start + len(self._audio[0]) <= keep_from:
            first = self._audio.popleft()
            self._audio_start += len(first)
            self._audio_len -= len(first)

