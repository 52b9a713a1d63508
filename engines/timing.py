"""What a TTS stream says about the text its audio voices: ``SpokenMark``s, and
``TimedStream``, the streams that carry them (Piper: every word's end from its
phoneme durations; OmniVoice: each sentence's end). The gateway reads them to
answer an interruption with the text heard (gateway/tts/spans.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SpokenMark:
    """Once ``sample`` samples of an utterance (at the engine's rate, from its first
    sample) are played, the listener has heard ``text[:char_end]``. ``start``: where
    the audio of the text since the previous mark begins (what lies before it, from
    the previous mark on, is the pause between words); None: at the previous mark."""

    char_end: int
    sample: int
    start: int | None = None

    def moved(self, offset: int = 0, scale: float = 1.0) -> SpokenMark:
        """The mark on a timeline ``scale`` times as fast, ``offset`` samples later."""
        start = None if self.start is None else round(self.start * scale) + offset
        return SpokenMark(self.char_end, round(self.sample * scale) + offset, start)


@runtime_checkable
class TimedStream(Protocol):
    """A stream that says which text its audio voices: ``marks`` grows, in order of
    ``sample``, before the frames it describes are yielded. ``word_exact``: a mark
    ends every word (the engine's own timing); otherwise the marks are sparser
    (sentence ends) and what lies between them is estimated (gateway/tts/spans.py)."""

    marks: list[SpokenMark]
    word_exact: bool
