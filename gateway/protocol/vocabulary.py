"""Custom vocabulary: the terms (names, products, jargon) a client asks the
recognizer to expect, and the free-text prompt the OpenAI-style fronts carry.

Both reach Whisper the same way: as text in its previous-text slot, which the
decoder conditions every decode of the stream on (engines/asr/decoder.py).
Terms are joined into one short list ("ComfyUI, Siobhan.": ``term_list_text`` in
engines/asr/prompt_text.py, the form by which the recognizer finds the list in its
context); a prompt goes as written. Every front parses its own vendor's field and
validates it here, so the limits and the messages are the same everywhere:

- at most ``MAX_TERMS`` terms, each 1..``MAX_TERM_CHARS`` characters after
  trimming, of letters, digits, marks, spaces and ``TERM_PUNCTUATION``
  (no commas: a term list is comma-separated);
- a prompt of at most ``MAX_PROMPT_CHARS`` characters, with no control
  characters and none of ``<``, ``>``, ``|`` (they spell Whisper's special tokens).

Past a limit the client gets a ``bad_request`` / ``bad_message`` naming the
field, the limit and the offending term.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

MAX_TERMS = 50
MAX_TERM_CHARS = 50
MAX_PROMPT_CHARS = 800
TERM_PUNCTUATION = "'’-.&+/#@_:"
_PROMPT_REFUSED = "<>|"


class VocabularyError(ValueError):
    """A term list or prompt past a limit; the message names the field and the limit."""


def parse_terms(values: Iterable[Any], field: str) -> tuple[str, ...]:
    """The trimmed, de-duplicated terms of ``values`` (order kept); ``VocabularyError``
    naming ``field`` when one is not a string, is empty, too long, or has a character a
    term cannot hold, or when there are more than ``MAX_TERMS``."""
    terms: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise VocabularyError(f"{field}: every term must be a string")
        term = " ".join(value.split())
        if not term:
            raise VocabularyError(f"{field}: a term is empty")
        if len(term) > MAX_TERM_CHARS:
            raise VocabularyError(f"{field}: {term[:20]!r}... is {len(term)} characters; "
                                  f"a term holds at most {MAX_TERM_CHARS}")
        bad = next((c for c in term if not _term_char(c)), None)
        if bad is not None:
            raise VocabularyError(f"{field}: {term[:MAX_TERM_CHARS]!r} holds {bad!r}; a term holds letters, "
                                  f"digits, spaces and {TERM_PUNCTUATION}")
        if term not in terms:
            terms.append(term)
        if len(terms) > MAX_TERMS:
            raise VocabularyError(f"{field}: more than {MAX_TERMS} terms")
    return tuple(terms)


def parse_prompt(value: Any, field: str) -> str:
    """A free-text prompt, trimmed; ``VocabularyError`` naming ``field`` past the limits."""
    if not isinstance(value, str):
        raise VocabularyError(f"{field}: must be a string")
    prompt = " ".join(value.split())
    if len(prompt) > MAX_PROMPT_CHARS:
        raise VocabularyError(f"{field}: {len(prompt)} characters; a prompt holds at most {MAX_PROMPT_CHARS}")
    bad = next((c for c in prompt if c in _PROMPT_REFUSED or unicodedata.category(c).startswith("C")), None)
    if bad is not None:
        raise VocabularyError(f"{field}: holds {bad!r}; a prompt holds no control characters and none of "
                              f"{_PROMPT_REFUSED}")
    return prompt


def _term_char(c: str) -> bool:
    return c == " " or c in TERM_PUNCTUATION or unicodedata.category(c)[0] in "LNM"
