"""How much of an utterance's text a listener heard, from how much of its audio
was played.

The rule: a word is heard once the larger part of it, its midpoint, has
played. Where a word's audio lies comes from its engine's marks. An engine
that times its words (Piper: its duration predictor, see
engines/piper/alignment.py) marks the end of every word it voices
(``word_exact``) and where its first sound starts: the audio from there to the
mark voices the text since the previous mark (without a start, the audio from
the previous mark does).
Other engines mark less: OmniVoice the end of each sentence, Pocket nothing
until the utterance's audio is complete. Between two marks the words share the
audio in proportion to their letters (one word alone takes all of it), and its
midpoint is the middle of its share. Past the last mark (the rest not made
yet) an engine that times its words has voiced nothing more; another is
estimated at ``ESTIMATE_MS_PER_CHAR``, a word heard once the estimate passes
its middle character.

``spoken`` always ends at a word's end (or the start, or the text's end once
all of its audio has played); ``spoken + remaining`` is always exactly the
utterance's text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engines.timing import SpokenMark, TimedStream

ESTIMATE_MS_PER_CHAR = 65.0  # English read aloud, about 15 characters a second
WORD = re.compile(r"\S+")


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
    known = _spans([SpokenMark(0, 0), *marks, *([SpokenMark(len(text), total)] if total is not None else [])])
    at = bisect.bisect_right([m.sample for m in known], played) - 1  # the last mark played through
    done = known[at]
    if done.char_end >= len(text):
        return len(text)
    following = known[at + 1] if at + 1 < len(known) else None
    if following is not None:
        begin = following.start if following.start is not None and done.sample <= following.start < \
            following.sample else done.sample  # before it: the pause between words
        share = max(0.0, (played - begin) / (following.sample - begin))
        return done.char_end + _heard_in_span(text[done.char_end:following.char_end], share)
    if word_exact:
        return done.char_end
    estimate = (played - done.sample) / rate * 1000 / ESTIMATE_MS_PER_CHAR
    return done.char_end + _heard_by_chars(text[done.char_end:], estimate)


def _spans(marks: list[SpokenMark]) -> list[SpokenMark]:
    """``marks`` with each mark that adds no text folded into the one before it: an
    engine may end one written word twice ("42" said as "forty two"), and the
    word's audio runs to the last of them."""
    out = [marks[0]]
    for mark in marks[1:]:
        if mark.char_end > out[-1].char_end:
            out.append(mark)
        elif len(out) > 1 and mark.sample > out[-1].sample:
            out[-1] = SpokenMark(out[-1].char_end, mark.sample, out[-1].start)
    return out


def _heard_in_span(span: str, share: float) -> int:
    """The characters of ``span`` heard once ``share`` (0..1) of its audio has played:
    its words share the audio by their letters, each heard once its middle played."""
    words = list(WORD.finditer(span))
    letters = sum(len(w.group()) for w in words)
    heard, before = 0, 0
    for word in words:
        size = len(word.group())
        if share * letters < before + size / 2:
            break
        heard, before = word.end(), before + size
    return heard


def _heard_by_chars(rest: str, chars: float) -> int:
    """The characters of ``rest`` heard once ``chars`` characters' worth of it played."""
    heard = 0
    for word in WORD.finditer(rest):
        if chars < (word.start() + word.end()) / 2:
            break
        heard = word.end()
    return heard


def stream_marks(stream: object) -> tuple[list[SpokenMark], bool]:
    """The marks of ``stream`` so far and whether they end every word."""
    if isinstance(stream, TimedStream):
        return list(stream.marks), bool(stream.word_exact)
    return [], False
