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
word, done on the worker with the sentence) and the phoneme words are paired
with the text's in order, one to one, one to several or several to one,
whichever pairing brings each group's phoneme counts closest (``match_words``).
A sentence takes the text's next words until their phonemes make up its own;
the last one takes the rest, so the last mark always ends the text. Each mark
also says where its word's first phoneme starts: the gap before it is a pause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from engines.timing import SpokenMark

WORD = re.compile(r"\S+")
MERGE_COST = 0.5  # phonemes: a word grouped with another costs this beyond the counts' gap
MAX_GROUP = 4
SENTENCE_END = re.compile(r"[.!?][\"')\]]*$")  # a text word that ends a sentence
SENTENCE_END_REACH = 2
BAND = 16  # text words a pairing may drift from the diagonal: keeps a long sentence linear
# (phoneme words, text words) one step pairs: one to one, one to several, several to one
GROUPS = [(1, b) for b in range(1, MAX_GROUP + 1)] + [(a, 1) for a in range(2, MAX_GROUP + 1)]


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
    return [end for _, end in phoneme_word_spans(phoneme_ids, id_samples, gap_id, quiet)]


def phoneme_word_spans(phoneme_ids: Sequence[int], id_samples: Sequence[int], gap_id: int,
                       quiet: frozenset[int] = frozenset()) -> list[tuple[int, int]]:
    """(start, end) samples of each phoneme word of one sentence: from its first
    phoneme (the gap and pads before it are the pause between words) to its end."""
    starts = [0]
    for samples in id_samples:
        starts.append(starts[-1] + int(samples))
    spans, first = [], 0
    for bound in word_boundaries(phoneme_ids, gap_id, quiet):
        voiced = next((i for i in range(first, bound) if phoneme_ids[i] != gap_id and phoneme_ids[i] not in quiet),
                      first)
        spans.append((starts[voiced], starts[bound]))
        first = bound
    return spans


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
        spans = phoneme_word_spans(phoneme_ids, id_samples, self.gap_id, self.quiet) \
            if len(id_samples) == len(phoneme_ids) else []
        sizes = phoneme_word_sizes(phoneme_ids, self.gap_id, self.quiet)
        words = self._take(sum(sizes), last)
        if not spans or not words:
            return []
        marks = [SpokenMark(self._words[w], end, start)
                 for w, (start, end) in zip(self._match(sizes, words), spans, strict=True)]
        if last:  # the whole text, trailing spaces too
            marks[-1] = SpokenMark(len(self.text), marks[-1].sample, marks[-1].start)
        return marks

    def _size(self, word: int) -> int:
        if word not in self._sizes:
            start = self._words[word - 1] if word else 0
            self._sizes[word] = self._count(self.text[start:self._words[word]])
        return self._sizes[word]

    def _take(self, phonemes: int, last: bool) -> list[int]:
        """The text words of a sentence of ``phonemes`` phonemes (the last sentence: all
        that are left): as many as make up its phonemes, said alone, moved to a sentence
        end within ``SENTENCE_END_REACH`` words of there (said alone, short words such as
        "a" count more phonemes than in a sentence)."""
        first, total = self._next, 0
        while self._next < len(self._words):
            size = self._size(self._next)
            if not last and self._next > first and total + size / 2 > phonemes:
                break
            total += size
            self._next += 1
        if not last:
            ends = [k for k in range(max(first + 1, self._next - SENTENCE_END_REACH),
                                     min(len(self._words), self._next + SENTENCE_END_REACH) + 1)
                    if SENTENCE_END.search(self.text[max(0, self._words[k - 1] - 4):self._words[k - 1]])]
            if ends:
                self._next = min(ends, key=lambda k: abs(k - self._next))
        return list(range(first, self._next))

    def _match(self, sizes: list[int], words: list[int]) -> list[int]:
        """For each phoneme word, the text word it ends (``match_words``)."""
        return [words[k] for k in match_words(sizes, [self._size(w) for w in words])]


def match_words(phonemes: list[int], text: list[int]) -> list[int]:
    """For each phoneme word (its phoneme count), the index of the text word it ends,
    given each text word's count said alone: the cheapest monotone pairing where one
    phoneme word voices one or several text words (espeak ran them together) or several
    phoneme words voice one text word (a number spelled out). A pairing costs how far
    each group's counts are apart (the text's scaled to the sentence's total) and
    ``MERGE_COST`` for each word grouped with another; a tie keeps a soundless text
    word ("-") with the word before it."""
    scale = sum(phonemes) / (sum(text) or 1)
    n, m = len(phonemes), len(text)
    said, written = [0.0], [0.0]  # running counts
    for count in phonemes:
        said.append(said[-1] + count)
    for count in text:
        written.append(written[-1] + scale * count)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    step: list[list[tuple[int, int]]] = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(1, n + 1):
        diagonal = i * m // n
        for j in range(max(1, diagonal - BAND), min(m, diagonal + BAND) + 1):
            for a, b in GROUPS:  # (phoneme words, text words) ending here
                if a > i or b > j or cost[i - a][j - b] == inf:
                    continue
                total = cost[i - a][j - b] + abs(said[i] - said[i - a] - written[j] + written[j - b]) + \
                    MERGE_COST * (a + b - 2)
                if total < cost[i][j]:
                    cost[i][j], step[i][j] = total, (a, b)
    if cost[n][m] == inf:  # more phoneme words than a number's spelling explains: end each one where it nears
        return [min(m - 1, k * m // max(1, n)) for k in range(1, n + 1)] if m else []
    out: list[int] = []
    i, j = n, m
    while i:
        a, b = step[i][j]
        out[:0] = [j - 1] * a
        i, j = i - a, j - b
    return out
