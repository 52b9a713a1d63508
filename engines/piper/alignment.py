"""Which words of a Piper utterance each stretch of its audio voices.

Piper's model decides how long every phoneme id lasts (its duration predictor's
frame counts, times the voice's hop); piper-tts hands them out as samples per
phoneme id (model.py exposes the tensor). espeak-ng separates words with a space
phoneme, so the samples before each space end a word, and a sentence's last word
ends with the sentence's audio.

The text's words (runs of non-space characters holding a letter or a digit:
espeak voices no lone punctuation) are matched to the phoneme words in order.
Where espeak made another number of words (a number spelled out, an
abbreviation), the phoneme words are spread over the text's words in
proportion, so marks stay in order and the last one still ends the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from engines.base import SpokenMark

WORD = re.compile(r"\S+")


def text_word_ends(text: str) -> list[int]:
    """The character offset just past each voiced word of ``text``."""
    return [m.end() for m in WORD.finditer(text) if any(ch.isalnum() for ch in m.group())]


def word_boundaries(phoneme_ids: Sequence[int], gap_id: int, pad_id: int | None = None) -> list[int]:
    """The id index just past each phoneme word of one sentence: each word gap
    that follows a phoneme (not a pad), then the sentence's end."""
    bounds: list[int] = []
    content = False
    for index, phoneme_id in enumerate(phoneme_ids):
        if phoneme_id == gap_id:
            if content:
                bounds.append(index)
            content = False
        elif phoneme_id != pad_id:
            content = True
    if content or not bounds:
        bounds.append(len(phoneme_ids))
    else:
        bounds[-1] = len(phoneme_ids)
    return bounds


def phoneme_word_ends(phoneme_ids: Sequence[int], id_samples: Sequence[int], gap_id: int,
                      pad_id: int | None = None) -> list[int]:
    """The sample (from the sentence's start) at which each phoneme word of one
    sentence ends; the last one ends with the sentence's audio."""
    starts = [0]
    for samples in id_samples:
        starts.append(starts[-1] + int(samples))
    return [starts[bound] for bound in word_boundaries(phoneme_ids, gap_id, pad_id)]


class PiperTimeline:
    """The marks of one utterance, sentence by sentence as its audio arrives."""

    def __init__(self, text: str, sentences: Sequence[Sequence[int]], gap_id: int, pad_id: int | None = None) -> None:
        self.gap_id, self.pad_id = gap_id, pad_id
        self.counts = [len(word_boundaries(ids, gap_id, pad_id)) for ids in sentences]
        self.firsts = [sum(self.counts[:i]) for i in range(len(self.counts))]
        ends = text_word_ends(text) or [len(text)]
        total = sum(self.counts)
        if total == len(ends):
            self.char_ends = list(ends)
        else:  # spread in proportion: phoneme word k ends with text word ceil((k+1) * n / total) - 1
            self.char_ends = [ends[max(0, math.ceil((k + 1) * len(ends) / total) - 1)] for k in range(total)]
        if self.char_ends:
            self.char_ends[-1] = len(text)  # once the last word is heard, so is the text

    def sentence_marks(self, index: int, phoneme_ids: Sequence[int], id_samples: Sequence[int],
                       offset: int, scale: float = 1.0) -> list[SpokenMark]:
        """Marks of sentence ``index`` whose audio starts at sample ``offset`` of the
        utterance; ``scale``: output samples per model sample (a resampled voice).
        Empty when the model's durations do not fit its ids (no mark beats a wrong one)."""
        if len(id_samples) != len(phoneme_ids) or index >= len(self.counts):
            return []
        ends = phoneme_word_ends(phoneme_ids, id_samples, self.gap_id, self.pad_id)
        if len(ends) != self.counts[index]:
            return []
        first = self.firsts[index]
        return [SpokenMark(self.char_ends[first + k], offset + round(end * scale)) for k, end in enumerate(ends)]
