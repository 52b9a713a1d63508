"""Approximate character timing for ElevenLabs' ``alignment``.

The engines report no per-character timing, so it is estimated from the audio
as it is sent: the characters of an utterance are laid out at a steady rate
(milliseconds per character, learned from the previous utterances of the same
stream, 65 at first) and each audio message carries the characters whose
estimated start falls before its end. Times are relative to the message's own
audio, as ElevenLabs' are; the last character of a message lasts to the
message's end, so a client that advances its clock by each message's span
stays on the audio's clock. Characters the audio ran out before (the estimate
was too slow) go out with the last message of the utterance. Utterances after
the first start with a space, so words never run together across them.

Good enough to place words (captions, what an interrupted agent had said), not
for lip sync: docs/fronts.md says so.
"""

from __future__ import annotations

from typing import Any

from gateway.tts.spans import ESTIMATE_MS_PER_CHAR

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
        self.chars = list((" " if leading_space else "") + text)
        self.rate = rate
        self.ms_per_char = rate.ms_per_char
        self.next = 0  # the first character not sent yet
        self.elapsed_ms = 0.0  # audio sent so far in this utterance

    def take(self, duration_ms: float) -> dict[str, Any] | None:
        """The alignment of the next message, ``duration_ms`` long; None when no
        character starts in it."""
        start_ms, end_ms = self.elapsed_ms, self.elapsed_ms + duration_ms
        self.elapsed_ms = end_ms
        count = 0
        while self.next + count < len(self.chars) and (self.next + count) * self.ms_per_char < end_ms:
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
        indices = range(self.next, self.next + count)
        starts = [min(duration_ms, max(0.0, i * self.ms_per_char - start_ms)) for i in indices]
        durations = [max(0.0, min(self.ms_per_char, duration_ms - s)) for s in starts]
        durations[-1] = max(0.0, duration_ms - starts[-1])
        chars = self.chars[self.next:self.next + count]
        self.next += count
        return {"chars": chars, "charStartTimesMs": [round(s) for s in starts],
                "charDurationsMs": [round(d) for d in durations]}
