"""The speculative final of a pause, and the eager end of turn it gives.

When the open utterance's speech pauses, its final is decoded before the
silence has closed it: if the silence lasts, that result IS the final, so
end of speech to final costs about the silence window rather than silence +
queue + decode. The speculation becomes due ``speculate_from_s`` into the
silence (the scheduler runs it on a free lane: an early final) and a due
final once the silence has lasted ``speculate_after_s`` (the turn has ended).
A stream with ``eager`` then sends its result as ``eager_final`` (when it has
words), at once or as soon as it is decoded. Speech coming back drops it
(``generation`` grows, so a decode still running answers for nothing) and,
if an ``eager_final`` was out, sends ``turn_resumed``.

A final decodes the utterance up to ``tail()`` past the start of its silence,
wherever the audio stood when it was dispatched, so the load never changes
its words. A stream without ``eager`` whose finals use Whisper's 30 s window
speculates only once the turn has ended and decodes up to that mark: such a
decode costs several short ones, a shorter pause would waste it, and its final
waits for the silence window anyway. An ``eager`` stream on the 30 s window
speculates from the first silent window, as on the short one: its eager final
is what an agent waits for.

One per stream, for its open utterance (``reset`` when it closes); the policy
calls it on the sidecar's main thread.
"""

from __future__ import annotations

from typing import Any

from .agreement import keep_stable_words
from .context import StreamContext
from .decoder import Transcript
from .framing import SAMPLE_RATE
from .term_spelling import respell_transcript
from .tuning import PolicyTuning
from .utterance import ClosedUtterance, DecodeJob, OpenUtterance, StreamOptions


class Speculation:
    def __init__(self, stream: str, options: StreamOptions, tuning: PolicyTuning, context: StreamContext) -> None:
        self.stream = stream
        self.options = options
        self.context = context  # the terms an eager final is written with, as the final is
        ends_turn = min(round(tuning.speculate_after_s * SAMPLE_RATE), options.silence_ms * SAMPLE_RATE // 2000)
        self.ends_turn_after = ends_turn  # samples of silence that end the turn
        if options.full_window_finals and not (options.eager and tuning.eager_full_window_speculates_early):
            self.starts_after, self.tail = ends_turn, ends_turn
        else:
            self.starts_after = min(round(tuning.speculate_from_s * SAMPLE_RATE), ends_turn)
            self.tail = round(tuning.final_tail_s * SAMPLE_RATE)
        self.generation = 0  # grows whenever a speculation is dropped
        self.reset()

    def reset(self) -> None:
        """No speculation: the utterance closed (its result, if any, was handed over)."""
        self.due: float | None = None  # when the pending decode became due
        self.running = False
        self.result: Transcript | None = None
        self.end = 0  # where the running or finished decode's audio ends
        self.turn_ended = False  # the silence has lasted long enough for an eager_final
        self.eager_sent = False  # an eager_final of the current result is out

    def on_silence(self, u: OpenUtterance, silent: int, now: float) -> list[dict[str, Any]]:
        """The pause has lasted ``silent`` samples so far."""
        if silent >= self.starts_after and self.due is None and not self.running and self.result is None:
            self.due = now
        if silent >= self.ends_turn_after and not self.turn_ended:
            self.turn_ended = True
            if self.options.eager and self.result is not None:
                return self._eager_final(u, self.result)
        return []

    def drop(self, u: OpenUtterance, at: int) -> list[dict[str, Any]]:
        """The speculation no longer stands (speech came back at ``at``, or a forced cut)."""
        sent = self.eager_sent
        self.generation += 1
        self.reset()
        if not sent:
            return []
        return [{"ev": "turn_resumed", "stream": self.stream, "utterance": u.index,
                 "at": round(at / SAMPLE_RATE, 3)}]

    def audio_end(self, u: OpenUtterance, pos: int) -> int:
        """Where the speculation's audio ends (the stream stands at ``pos``)."""
        assert u.silence_since is not None  # a speculation is only due in a pause
        return min(pos, u.silence_since + self.tail)

    def take(self, u: OpenUtterance, pos: int) -> int:
        """Mark the due decode as running; returns where its audio ends."""
        self.due, self.running, self.end = None, True, self.audio_end(u, pos)
        return self.end

    def hand_over(self, closed: ClosedUtterance) -> bool:
        """The utterance closed: give it the result, or the running decode to wait for.
        False when neither exists (it needs a decode of its own)."""
        if self.result is not None:
            closed.result, closed.dispatched = self.result, True
        elif self.running:  # the running decode answers for it, not an older one still on a lane
            closed.dispatched, closed.awaits = True, self.generation
        else:
            return False
        return True

    def on_result(self, u: OpenUtterance, job: DecodeJob, result: Transcript) -> list[dict[str, Any]]:
        if job.generation != self.generation or not self.running:
            return []  # dropped while it ran
        self.running, self.result = False, result
        if self.options.eager and self.turn_ended:
            return self._eager_final(u, result)
        return []

    def _eager_final(self, u: OpenUtterance, r: Transcript) -> list[dict[str, Any]]:
        text, words = respell_transcript(*keep_stable_words(u.agreement.stable, r.text, r.words),
                                         self.context.terms)
        if not text:
            return []
        self.eager_sent = True
        speech_end = u.silence_since if u.silence_since is not None else self.end
        event: dict[str, Any] = {
            "ev": "eager_final", "stream": self.stream, "utterance": u.index, "text": text,
            "start": round(u.speech_start / SAMPLE_RATE, 3), "end": round(speech_end / SAMPLE_RATE, 3),
            "language": r.language}
        if self.options.word_timestamps:
            event["words"] = [w.to_dict() for w in words]
        return [event]
