"""LocalAgreement-3: the words three consecutive hypotheses agree on become stable.

Words are compared case- and punctuation-insensitively; the committed words
keep the spelling they had when first committed, so ``stable`` only grows.
The last word of a hypothesis is never committed: it sits at the edge of the
audio and may still be cut mid-word.

Three, not two: stable words are kept in front of the final, so a word two
early hypotheses (on a second or two of audio) got wrong the same way becomes
a final error. On three sets of 40 Harvard sentences (Piper and espeak-ng,
clean and noisy) the streaming finals had 190 word errors with agreement of
three, 196 with two; offline decoding of the same clips had 186.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from .decoder import Word

_NORMALIZE = re.compile(r"[^\w']+")


def normalize(word: str) -> str:
    return _NORMALIZE.sub("", word.lower())


def split_words(text: str) -> list[str]:
    return text.split()


AGREE = 3  # consecutive hypotheses that must agree on a word
# Words at the end of every agreeing hypothesis that are never committed. Whisper
# revises a word until it has heard a good stretch of speech after it, and it
# revises it the same way in consecutive partials (their audio differs by half a
# second and all of it ends mid-word), so agreement alone is not enough: committed
# words are kept in the final even where the final's free decode, on the whole
# utterance, hears them right. On the quick-paced set (984 words, two renditions,
# bench/asr_variants.py) the finals had 32 word errors committing all but the
# newest hypothesis's last word, 27 holding back 6 words, 25 holding back 10, and
# 25 committing nothing (offline: 23). Ten words is about three seconds of speech:
# a sentence is rarely stable before its final, a long dictation still is.
HOLD_BACK = 10
HOLD_BACK_EARLIER = HOLD_BACK  # for the hypotheses before the newest (A/B of the older rule: 1 and 0)


class Agreement:
    """Tracks the committed (stable) words of one utterance."""

    def __init__(self, committed: list[str] | None = None, agree: int = AGREE) -> None:
        self.committed: list[str] = list(committed or [])
        self._previous: list[list[str]] = []  # the last ``agree - 1`` hypotheses, as shown
        self._agree = agree

    @property
    def stable(self) -> str:
        return " ".join(self.committed)

    def update(self, hypothesis: list[str]) -> list[str]:
        """Take a new hypothesis; return the full word list to show (stable + the rest)."""
        shown = self.committed + hypothesis[len(self.committed):] if not self._agrees(hypothesis) else hypothesis
        if len(self._previous) == self._agree - 1:
            common = 0
            limit = min([len(shown) - HOLD_BACK] + [len(p) - HOLD_BACK_EARLIER for p in self._previous])
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
