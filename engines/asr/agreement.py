"""LocalAgreement: the words ``agree`` consecutive hypotheses agree on become stable.

Words are compared case- and punctuation-insensitively; the committed words
keep the spelling they had when first committed, so ``stable`` only grows.
The last words of every agreeing hypothesis are never committed (the hold-back,
``PolicyTuning.hold_back_words``): they sit near the edge of the audio, and
Whisper revises a word until it has heard a good stretch of speech after it,
the same way in consecutive partials. Stable words are kept in front of the
final, so a word committed too early becomes a final error.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from .decoder import Word
from .tuning import PolicyTuning

_NORMALIZE = re.compile(r"[^\w']+")


def normalize(word: str) -> str:
    return _NORMALIZE.sub("", word.lower())


def split_words(text: str) -> list[str]:
    return text.split()


class Agreement:
    """Tracks the committed (stable) words of one utterance."""

    def __init__(self, committed: list[str] | None = None, tuning: PolicyTuning | None = None) -> None:
        tuning = tuning or PolicyTuning()
        self.committed: list[str] = list(committed or [])
        self._previous: list[list[str]] = []  # the last ``agree - 1`` hypotheses, as shown
        self._agree = tuning.agree
        self._hold_back = tuning.hold_back_words
        self._hold_back_earlier = tuning.hold_back_earlier_words

    @property
    def stable(self) -> str:
        return " ".join(self.committed)

    @property
    def latest(self) -> str:
        """The newest hypothesis as shown (the stable words before any)."""
        return " ".join(self._previous[-1]) if self._previous else self.stable

    def update(self, hypothesis: list[str]) -> list[str]:
        """Take a new hypothesis; return the full word list to show (stable + the rest)."""
        shown = self.committed + hypothesis[len(self.committed):] if not self._agrees(hypothesis) else hypothesis
        if len(self._previous) == self._agree - 1:
            common = 0
            limit = min([len(shown) - self._hold_back] + [len(p) - self._hold_back_earlier for p in self._previous])
            while common < limit and all(normalize(p[common]) == normalize(shown[common]) for p in self._previous):
                common += 1
            if common > len(self.committed):
                self.committed = self.committed + shown[len(self.committed):common]
        self._previous = [*self._previous, shown][-(self._agree - 1):]
        return self.committed + shown[len(self.committed):]

    def _agrees(self, hypothesis: list[str]) -> bool:
        if len(hypothesis) < len(self.committed):
            return False
        return all(normalize(a) == normalize(b) for a, b in zip(self.committed, hypothesis, strict=False))


def keep_stable_words(stable: str, text: str, words: list[Word]) -> tuple[str, list[Word]]:
    """The final text with the stable words in front, whatever the free decode said.

    The free decode goes on after the word it heard where the stable words end
    (found by aligning the two, case- and punctuation-insensitively), so a word
    the two split differently ("Rises" / "Rice is") is not repeated after them.
    """
    committed = split_words(stable)
    decoded = split_words(text)
    if not committed or [normalize(w) for w in decoded[:len(committed)]] == [normalize(w) for w in committed]:
        return (" ".join(committed + decoded[len(committed):]) if committed else text), words
    rest = _continuation(committed, decoded)
    merged = committed + decoded[rest:]
    if len(words) == len(decoded):  # keep the timings of the words heard, the stable spelling in front
        head, tail = words[:rest], words[rest:]
        if len(head) == len(committed):
            words = [Word(c, w.start, w.end, w.probability) for c, w in zip(committed, head, strict=True)]
        else:  # the stable words share the time of the words heard for them
            start = head[0].start if head else (tail[0].start if tail else 0.0)
            step = ((head[-1].end if head else start) - start) / len(committed)
            words = [Word(c, start + k * step, start + (k + 1) * step, 0.0) for k, c in enumerate(committed)]
        words += [Word(w.word, w.start, w.end, w.probability) for w in tail]
    return " ".join(merged), words


MAX_SHIFT = 2  # words the two may have split differently


def _continuation(committed: list[str], decoded: list[str]) -> int:
    """Where in ``decoded`` the words after ``committed`` start: after the last
    stable word where the decode has it nearby, else after as many words."""
    a, b = [normalize(w) for w in committed], [normalize(w) for w in decoded]
    for block in SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        end = block.b + block.size
        if block.size and block.a + block.size == len(a) and abs(end - len(a)) <= MAX_SHIFT:
            return end
    return min(len(committed), len(decoded))
