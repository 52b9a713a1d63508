"""The text buffer of a /v1/tts session: fragments in, complete sentences out.

An LLM streams its answer token by token. Speech for the first sentence must
start as soon as that sentence is complete, not when the turn ends, so the
buffer hands out every sentence the moment its end is certain: terminal
punctuation followed by whitespace, or a line break. A run-on text with no
sentence end is cut at a clause boundary once it grows past ``soft_max_chars``
so it never waits for the whole turn either.
"""

from __future__ import annotations

import re

# Lower-cased words that end with a period without ending a sentence.
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "no", "fig", "approx",
    "mt", "inc", "ltd", "co", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
})

# A sentence end: . ! ? or … (possibly repeated), optional closing quotes or
# brackets, then whitespace. A blank line ends a paragraph; a single newline
# inside an LLM's markdown list ends an item.
_SENTENCE_END = re.compile(r"([.!?\u2026]+[\"'\u201d\u2019)\]]*)(\s+)|(\n)")
_CLAUSE_BREAK = re.compile(r"[,;:\u2014]\s")


class SentenceBuffer:
    """Accumulates fragments and returns complete sentences.

    Not thread-safe; owned by one session.
    """

    def __init__(self, max_chars: int, soft_max_chars: int = 400) -> None:
        self.max_chars = max_chars
        self.soft_max_chars = min(soft_max_chars, max_chars)
        self._text = ""

    @property
    def pending(self) -> str:
        return self._text

    def append(self, fragment: str) -> list[str]:
        """Add a fragment; return the sentences it completed (possibly none).

        The unfinished rest never exceeds ``soft_max_chars`` (itself at most
        ``max_chars``, the per-utterance limit): longer text is cut first.
        """
        text = self._text + fragment
        sentences, rest = split_sentences(text)
        while len(rest) > self.soft_max_chars:
            head, rest = _cut_clause(rest, self.soft_max_chars)
            sentences.append(head)
        self._text = rest
        return [s for s in sentences if s]

    def flush(self) -> str | None:
        """Everything left, as one utterance (None if only whitespace remains)."""
        text, self._text = self._text.strip(), ""
        return text or None

    def clear(self) -> None:
        self._text = ""

    def restore(self, pending: str) -> None:
        """Put back what ``pending`` held before an ``append`` whose sentences were refused."""
        self._text = pending


def split_sentences(text: str) -> tuple[list[str], str]:
    """Split ``text`` into complete sentences and the unfinished rest.

    The rest keeps its leading whitespace stripped, so fragments can be glued
    back together exactly as the client sent them.
    """
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.group(1) is not None and _is_abbreviation(text, match.start(1), match.group(1)):
            continue
        end = match.end(1) if match.group(1) is not None else match.start(3)
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    return sentences, text[start:].lstrip()


def _is_abbreviation(text: str, punct_at: int, punct: str) -> bool:
    if punct != ".":
        return False
    word_start = punct_at
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:punct_at].lower().lstrip("(\"'")
    # Single letters ("J. R. R. Tolkien") and known abbreviations do not end a sentence.
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _cut_clause(text: str, limit: int) -> tuple[str, str]:
    """Cut a run-on text at the last clause break (else the last space) before ``limit``."""
    window = text[:limit]
    breaks = list(_CLAUSE_BREAK.finditer(window))
    if breaks:
        cut = breaks[-1].start() + 1
    else:
        space = window.rfind(" ")
        cut = space if space > 0 else limit
    return text[:cut].strip(), text[cut:].lstrip()
