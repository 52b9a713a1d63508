"""Wyoming's streaming transcript from the dictation partials: append-only
chunks, at the partials' cadence.

A partial is the whole hypothesis of the open utterance and may revise any
word; a chunk cannot be taken back. So a word goes out once
``AGREE_PARTIALS`` partials in a row have it (compared case- and
punctuation-insensitively) and it is not the newest word of the partial (the
one at the audio's edge, still being heard), or once the recognizer's own
``stable`` prefix holds it. A word the partials write as different words
that sound alike ("4", "four", "For": one Soundex code, digits read as
words) between words they agree on still counts as held: what was heard is
settled, only its spelling is not, and waiting for the spelling to settle
held a whole utterance back. The newest spelling goes out; a word that
sounds different ("on", "off") stops the agreement. The final sends the rest of the utterance: the
string it adds to what was sent when it extends it, else its words past as
many as were sent (a word revised after it went out stays as sent; the
``transcript`` event has the final text).
"""

from __future__ import annotations

import re

AGREE_PARTIALS = 2  # partials in a row that must hold a word before it is sent
_NOT_WORD = re.compile(r"[^\w']+")
_DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_SOUNDEX_CODES = {letter: str(code) for code, letters in enumerate(
    ("aeiouy", "bfpv", "cgjkqsxz", "dt", "l", "mn", "r")) for letter in letters}  # h, w: no code, no break


def _same(a: str, b: str) -> bool:
    return _NOT_WORD.sub("", a.lower()) == _NOT_WORD.sub("", b.lower())


def _sound(word: str) -> str:
    """The word's Soundex code (first letter, then up to three consonant
    classes), a number up to ten read as its word first."""
    letters = _NOT_WORD.sub("", word.lower()).replace("'", "")
    if letters.isdigit() and int(letters) < len(_DIGIT_WORDS):
        letters = _DIGIT_WORDS[int(letters)]
    if not letters.isalpha():
        return letters
    code, last = letters[0], _SOUNDEX_CODES.get(letters[0], "")
    for letter in letters[1:]:
        digit = _SOUNDEX_CODES.get(letter)
        if digit is None:
            continue
        if digit not in ("0", last):
            code += digit
        last = digit
    return code[:4]


class Chunker:
    """One transcription's chunks; ``partial`` and ``final`` return the next
    chunk to send, or None."""

    def __init__(self) -> None:
        self.sent = ""  # every chunk so far, concatenated
        self._utterance_sent = ""  # what was sent of the open utterance
        self._utterance_words = 0
        self._recent: list[list[str]] = []  # the last partials' words but the newest, oldest first

    def partial(self, text: str, stable: str) -> str | None:
        words = text.split()
        heard = words[:-1]
        self._recent = [*self._recent, heard][-AGREE_PARTIALS:]
        agreed = self._agreed(heard) if len(self._recent) == AGREE_PARTIALS else 0
        count = max(agreed, len(stable.split()))
        return self._advance(words[:count])

    def _agreed(self, heard: list[str]) -> int:
        """How many leading words the recent partials hold, a word respelled as
        one that sounds alike, between held ones, included."""
        length = min(map(len, self._recent))

        def held(index: int) -> bool:
            return all(_same(r[index], heard[index]) for r in self._recent)

        def respelled(index: int) -> bool:
            return all(_sound(r[index]) == _sound(heard[index]) for r in self._recent)

        agreed = 0
        while agreed < length:
            if held(agreed):
                agreed += 1
            elif agreed + 1 < length and respelled(agreed) and held(agreed + 1):
                agreed += 2
            else:
                break
        return agreed

    def final(self, text: str) -> str | None:
        """The utterance's rest; the next partial starts a new utterance."""
        chunk = self._advance(text.split())
        self._utterance_sent, self._utterance_words, self._recent = "", 0, []
        return chunk

    def _advance(self, words: list[str]) -> str | None:
        target = " ".join(words)
        if target.startswith(self._utterance_sent):
            gained = target[len(self._utterance_sent):]
        else:  # an earlier word was revised: go on after as many words as were sent
            gained = " ".join(words[self._utterance_words:])
            gained = " " + gained if gained else ""
        if not gained:
            return None
        if not self._utterance_sent:  # an utterance's first words: one space from the one before
            gained = (" " if self.sent else "") + gained.lstrip()
        self._utterance_sent += gained if self._utterance_sent else gained.lstrip()
        self._utterance_words = max(self._utterance_words, len(words))
        self.sent += gained
        return gained
