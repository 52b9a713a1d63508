"""LocalAgreement-2: the words two consecutive hypotheses agree on become stable.

Words are compared case- and punctuation-insensitively; the committed words
keep the spelling they had when first committed, so ``stable`` only grows.
The last word of a hypothesis is never committed: it sits at the edge of the
audio and may still be cut mid-word.
"""

from __future__ import annotations

import re

from .decoder import Word

_NORMALIZE = re.compile(r"[^\w']+")


def normalize(word: str) -> str:
    return _NORMALIZE.sub("", word.lower())


def split_words(text: str) -> list[str]:
    return text.split()


class Agreement:
    """Tracks the committed (stable) words of one utterance."""

    def __init__(self, committed: list[str] | None = None) -> None:
        self.committed: list[str] = list(committed or [])
        self._previous: list[str] | None = None

    @property
    def stable(self) -> str:
        return " ".join(self.committed)

    def update(self, hypothesis: list[str]) -> list[str]:
        """Take a new hypothesis; return the full word list to show (stable + the rest)."""
        shown = self.committed + hypothesis[len(self.committed):] if not self._agrees(hypothesis) else hypothesis
        if self._previous is not None:
            common = 0
            limit = min(len(self._previous), len(shown) - 1)
            while common < limit and normalize(self._previous[common]) == normalize(shown[common]):
                common += 1
            if common > len(self.committed):
                self.committed = self.committed + shown[len(self.committed):common]
        self._previous = shown
        return self.committed + shown[len(self.committed):]

    def _agrees(self, hypothesis: list[str]) -> bool:
        if len(hypothesis) < len(self.committed):
            return False
        return all(normalize(a) == normalize(b) for a, b in zip(self.committed, hypothesis, strict=False))


def keep_stable_words(stable: str, text: str, words: list[Word]) -> tuple[str, list[Word]]:
    """The final text with the stable words in front, whatever the free decode said."""
    committed = split_words(stable)
    decoded = split_words(text)
    if not committed or [normalize(w) for w in decoded[:len(committed)]] == [normalize(w) for w in committed]:
        return (" ".join(committed + decoded[len(committed):]) if committed else text), words
    merged = committed + decoded[len(committed):]
    if len(words) == len(decoded):  # keep the timings, show the stable spelling
        words = [Word(merged[i], w.start, w.end, w.probability) for i, w in enumerate(words)]
        words += [Word(m, words[-1].end if words else 0.0, words[-1].end if words else 0.0, 0.0)
                  for m in merged[len(words):]]
    return " ".join(merged), words

