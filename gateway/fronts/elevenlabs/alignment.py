"""Character timing for ElevenLabs' ``alignment``, from the engine's own marks.

Each audio message carries the characters whose start falls before its end.
Where the engine's stream marks its words (engines/timing.py: Piper marks the
end of every word from its duration predictor, OmniVoice the end of each
sentence) a character starts where its marked span starts plus its share of
that span's audio: a word's letters share the word's time evenly. Past the
last mark (text not synthesized yet), and for an engine that marks nothing
(Pocket), the characters are laid out at a steady rate (milliseconds per
character, learned from the previous utterances of the same stream, 65 at
first). Times are relative to the message's own audio, as ElevenLabs' are; the
last character of a message lasts to the message's end, so a client that
advances its clock by each message's span stays on the audio's clock.
Characters the audio ran out before go out with the last message of the
utterance. Utterances after the first start with a space, so words never run
together across them.

Word-exact with Piper (to the predictor's timing, not to the waveform);
between sentence marks, or with no marks, good enough to place words, not for
lip sync: docs/fronts.md says so.
"""

from __future__ import annotations

import bisect
from typing import Any

from engines.timing import SpokenMark
from gateway.tts.spans import ESTIMATE_MS_PER_CHAR, stream_marks

DEFAULT_MS_PER_CHAR = ESTIMATE_MS_PER_CHAR  # the same first guess an interruption's estimate uses
LEARNING = 0.5  # weight of the newest utterance in the rate estimate


class SpeechRate:
    """Milliseconds per character of one stream, learned utterance by utterance."""

    def __init__(self) -> None:
        self.ms_per_char = DEFAULT_MS_PER_CHAR
        self.utterances = 0

    def learn(self, chars: int, audio_ms: float) -> None:
        if chars <= 0 or audio_ms <= 0:
            return
        observed = audio_ms / chars
        self.ms_per_char += LEARNING * (observed - self.ms_per_char) if self.utterances else \
            observed - self.ms_per_char
        self.utterances += 1


class CharClock:
    """The characters of one utterance, handed out message by message."""

    def __init__(self, text: str, rate: SpeechRate, leading_space: bool) -> None:
        self.lead = 1 if leading_space else 0  # the space before the text starts at 0
        self.chars = list((" " if leading_space else "") + text)
        self.rate = rate
        self.ms_per_char = rate.ms_per_char
        self.next = 0  # the first character not sent yet
        self.elapsed_ms = 0.0  # audio sent so far in this utterance
        self._stream: object | None = None  # the engine stream whose marks time the text
        self._native_rate = 0

    def follow(self, stream: object, native_rate: int) -> None:
        """Time the text by ``stream``'s marks (samples at ``native_rate``)."""
        self._stream, self._native_rate = stream, native_rate

    def start_ms(self, index: int) -> float:
        """When character ``index`` of ``chars`` starts, from the utterance's first sample."""
        marks = stream_marks(self._stream)[0] if self._stream is not None and self._native_rate else []
        at = index - self.lead  # in the text
        if at < 0:
            return 0.0
        if not marks:
            return index * self.ms_per_char
        known = [SpokenMark(0, 0), *marks]
        ends = [m.char_end for m in known]
        span = bisect.bisect_right(ends, at)  # the first mark whose span holds the character
        before = known[span - 1]
        if span >= len(known):  # past the marks (or none): the steady rate, from the last mark's end
            first = before.char_end + self.lead if span > 1 else 0
            return self._ms(before.sample) + (index - first) * self.ms_per_char
        after = known[span]
        share = (at - before.char_end) / max(1, after.char_end - before.char_end)
        return self._ms(before.sample) + share * (self._ms(after.sample) - self._ms(before.sample))

    def _ms(self, sample: int) -> float:
        return sample * 1000 / self._native_rate if self._native_rate else 0.0

    def take(self, duration_ms: float) -> dict[str, Any] | None:
        """The alignment of the next message, ``duration_ms`` long; None when no
        character starts in it."""
        start_ms, end_ms = self.elapsed_ms, self.elapsed_ms + duration_ms
        self.elapsed_ms = end_ms
        count = 0
        while self.next + count < len(self.chars) and self.start_ms(self.next + count) < end_ms:
            count += 1
        return self._emit(count, start_ms, duration_ms)

    def rest(self) -> dict[str, Any] | None:
        """What is left when the utterance's audio is over (a zero-length chunk);
        the stream's rate learns from this utterance."""
        self.rate.learn(len(self.chars), self.elapsed_ms)
        return self._emit(len(self.chars) - self.next, self.elapsed_ms, 0.0)

    def _emit(self, count: int, start_ms: float, duration_ms: float) -> dict[str, Any] | None:
        if count <= 0:
            return None
        indices = range(self.next, self.next + count + 1)
        at = [min(duration_ms, max(0.0, self.start_ms(i) - start_ms)) for i in indices]
        starts = at[:-1]
        # a character lasts until the next one starts; the message's last one to its end
        durations = [max(0.0, following - s) for s, following in zip(starts, at[1:], strict=True)]
        durations[-1] = max(0.0, duration_ms - starts[-1])
        chars = self.chars[self.next:self.next + count]
        self.next += count
        return {"chars": chars, "charStartTimesMs": [round(s) for s in starts],
                "charDurationsMs": [round(d) for d in durations]}
