"""Which words of a Piper utterance each stretch of its audio voices.

Piper's model decides how long every phoneme id lasts (its duration predictor's
frame counts, times the voice's hop); piper-tts hands them out as samples per
phoneme id (model.py exposes the tensor). espeak-ng separates words with a space
phoneme, so the samples before each space end a phoneme word, and a sentence's
last word ends with the sentence's audio.

espeak's words are not always the text's: it runs short function words into
the next ("on the" is one word, ``ɔnðə``) and spells a number as several
("42": ``fˈɔːɹɾi tˈuː``). So the text's words are matched by their sounds:
each one is phonemized alone (``phoneme_count``, a fraction of a millisecond a
word, done on the worker with the sentence) and a phoneme word ends the text
word whose running phoneme count is nearest to its own. A sentence takes the
text's next words until their phonemes make up its own; the last one takes
the rest, so the last mark always ends the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from engines.timing import SpokenMark

WORD = re.compile(r"\S+")


def word_boundaries(phoneme_ids: Sequence[int], gap_id: int, quiet: frozenset[int] = frozenset()) -> list[int]:
    """The id index just past each phoneme word of one sentence: each word gap
    that follows a phoneme (``quiet`` ids, pads and start marks, are none), then
    the sentence's end."""
    bounds: list[int] = []
    content = False
    for index, phoneme_id in enumerate(phoneme_ids):
        if phoneme_id == gap_id:
            if content:
                bounds.append(index)
            content = False
        elif phoneme_id not in quiet:
            content = True
    if content or not bounds:
        bounds.append(len(phoneme_ids))
    else:
        bounds[-1] = len(phoneme_ids)
    return bounds


def phoneme_word_ends(phoneme_ids: Sequence[int], id_samples: Sequence[int], gap_id: int,
                      quiet: frozenset[int] = frozenset()) -> list[int]:
    """The sample (from the sentence's start) at which each phoneme word of one
    sentence ends; the last one ends with the sentence's audio."""
    starts = [0]
    for samples in id_samples:
        starts.append(starts[-1] + int(samples))
    return [starts[bound] for bound in word_boundaries(phoneme_ids, gap_id, quiet)]


def phoneme_word_sizes(phoneme_ids: Sequence[int], gap_id: int, quiet: frozenset[int]) -> list[int]:
    """How many phonemes each phoneme word of one sentence holds."""
    sizes, start = [], 0
    for bound in word_boundaries(phoneme_ids, gap_id, quiet):
        sizes.append(sum(1 for i in phoneme_ids[start:bound] if i != gap_id and i not in quiet))
        start = bound
    return sizes


class PiperTimeline:
    """The marks of one utterance, sentence by sentence in order (not thread-safe:
    the stream's jobs run one after another)."""

    def __init__(self, text: str, sentences: int, gap_id: int, quiet: frozenset[int],
                 phoneme_count: Callable[[str], int]) -> None:
        self.text = text
        self.sentences = sentences
        self.gap_id, self.quiet = gap_id, quiet
        self._count = phoneme_count
        self._words = [m.end() for m in WORD.finditer(text)]  # the end of each text word
        self._sizes: dict[int, int] = {}  # text word -> its phonemes, said alone
        self._next = 0  # the first text word no sentence took yet
        self._done = 0  # sentences marked (or skipped)

    def sentence_marks(self, phoneme_ids: Sequence[int], id_samples: Sequence[int]) -> list[SpokenMark]:
        """Marks of the next sentence, samples from its own start. Empty when the
        model's durations do not fit its ids (no mark beats a wrong one)."""
        self._done += 1
        last = self._done >= self.sentences
        ends = phoneme_word_ends(phoneme_ids, id_samples, self.gap_id, self.quiet) \
            if len(id_samples) == len(phoneme_ids) else []
        sizes = phoneme_word_sizes(phoneme_ids, self.gap_id, self.quiet)
        words = self._take(sum(sizes), last)
        if not ends or not words:
            return []
        marks = [SpokenMark(self._words[w], end) for w, end in zip(self._match(sizes, words), ends, strict=True)]
        if last:
            marks[-1] = SpokenMark(len(self.text), marks[-1].sample)  # the whole text, trailing spaces too
        return marks

    def _size(self, word: int) -> int:
        if word not in self._sizes:
            start = self._words[word - 1] if word else 0
            self._sizes[word] = self._count(self.text[start:self._words[word]])
        return self._sizes[word]

    def _take(self, phonemes: int, last: bool) -> list[int]:
        """The text words of a sentence of ``phonemes`` phonemes (the last sentence: all that are left)."""
        taken: list[int] = []
        total = 0
        while self._next < len(self._words):
            size = self._size(self._next)
            if not last and taken and total + size / 2 > phonemes:
                break
            taken.append(self._next)
            total += size
            self._next += 1
        return taken

    def _match(self, sizes: list[int], words: list[int]) -> list[int]:
        """For each phoneme word, the text word it ends: the one whose running
        phoneme count (scaled to the sentence's) is nearest, never going back."""
        text_total = sum(self._size(w) for w in words) or 1
        scale = sum(sizes) / text_total
        running, cumulative = 0, []
        for w in words:
            running += self._size(w)
            cumulative.append(running * scale)
        out, at, said = [], 0, 0
        for size in sizes:
            said += size
            while at + 1 < len(words) and abs(cumulative[at + 1] - said) <= abs(cumulative[at] - said):
                at += 1
            out.append(words[at])
        out[-1] = words[-1]  # the sentence's end ends its last word
        return out
