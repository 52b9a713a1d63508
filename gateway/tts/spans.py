"""How much of an utterance's text a listener heard, from how much of its audio
was played.

An engine that times its words (Piper: its duration predictor, see
engines/piper/alignment.py) marks the end of every word (``word_exact``): the
text heard is the text up to the last word whose audio was played to its end.
Other engines mark less: OmniVoice the end of each sentence, Pocket nothing
until the utterance's audio is complete; between two marks the characters are
laid out evenly over the audio, and past the last mark (the rest not made yet)
at ``ESTIMATE_MS_PER_CHAR``. An estimate is cut back to the end of a word, so
``spoken`` always ends at a word boundary or the start.

``spoken + remaining`` is always exactly the utterance's text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engines.timing import SpokenMark, TimedStream

ESTIMATE_MS_PER_CHAR = 65.0  # English read aloud, about 15 characters a second
WORD_END = re.compile(r"\S(?=\s|$)")


@dataclass(frozen=True)
class TextSplit:
    spoken: str
    remaining: str


def split_text(text: str, played: int, marks: Sequence[SpokenMark], *, word_exact: bool, total: int | None,
               rate: int) -> TextSplit:
    """``text`` cut where ``played`` samples (at the engine's ``rate``) of its audio
    end. ``total``: the utterance's whole audio, once the engine is done with it
    (all of it played means all of the text heard); None while it is not."""
    chars = spoken_chars(text, played, marks, word_exact=word_exact, total=total, rate=rate)
    return TextSplit(text[:chars], text[chars:])


def spoken_chars(text: str, played: int, marks: Sequence[SpokenMark], *, word_exact: bool, total: int | None,
                 rate: int) -> int:
    known = [SpokenMark(0, 0), *marks]
    if total is not None:
        known.append(SpokenMark(len(text), total))
    samples = [m.sample for m in known]
    at = bisect.bisect_right(samples, played) - 1  # the last mark played through
    done = known[at]
    if word_exact or done.char_end >= len(text):
        return min(done.char_end, len(text))
    following = known[at + 1] if at + 1 < len(known) else None
    if following is not None and following.sample > done.sample:
        share = (played - done.sample) / (following.sample - done.sample)
        estimate = done.char_end + share * (following.char_end - done.char_end)
    else:
        estimate = done.char_end + (played - done.sample) / rate * 1000 / ESTIMATE_MS_PER_CHAR
    return _word_end_before(text, done.char_end, int(estimate))


def _word_end_before(text: str, start: int, limit: int) -> int:
    """The end of the last word of ``text`` that starts at or after ``start`` and ends by ``limit``."""
    best = start
    for match in WORD_END.finditer(text, start):
        if match.end() > limit:
            break
        best = match.end()
    return best


def stream_marks(stream: object) -> tuple[list[SpokenMark], bool]:
    """The marks of ``stream`` so far and whether they end every word."""
    if isinstance(stream, TimedStream):
        return list(stream.marks), bool(stream.word_exact)
    return [], False
