"""Writing the client's terms the way the client spells them.

The terms reach Whisper as context (engines/asr/context.py) and that is what
makes the recognizer say a rare name at all; but tiny models often come close
and miss the spelling: "Tandiwe" for Thandiwe, "Superbase" for Supabase,
"pg vector" for pgvector, "Akonkwo" for Okonkwo. A client that gave us its term
list wants its own spelling back, so a final's words are compared with the
terms and a near miss is written as the term.

Two texts are near when their letters agree once spaces and case are set aside
(``comfy UI`` is ``ComfyUI``), or when they sound alike by a rough English
sound key (vowel runs folded to one, letters that sound the same merged,
doubles collapsed) and their letters are not far apart. Short keys must agree
exactly, and a run of words that begins or ends with a common function word is never rewritten, so
"if a" does not become "Aoife". The rules are deliberately conservative: a missed
respelling costs the term, a wrong one costs a word the speaker really said.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from .decoder import Word
from .function_words import FUNCTION_WORDS

KEY_SIMILARITY = 0.8  # at least this share of the sound key agrees
LETTER_SIMILARITY = 0.5  # and at least this share of the letters
MIN_FUZZY_KEY = 4  # keys shorter than this must agree exactly
EXTRA_WORDS = 1  # a term of n words may be heard as up to n + this many
_SOUNDS = (("sch", "s"), ("tch", "c"), ("ph", "f"), ("gh", "g"), ("th", "t"), ("dh", "d"), ("ck", "k"),
           ("qu", "kv"), ("q", "k"), ("x", "ks"), ("cz", "c"), ("sz", "s"), ("w", "v"),
           ("z", "s"), ("y", "i"))
_VOWELS = re.compile(r"[aeiou]+")
_SOFT_C = re.compile(r"c(?=[eiy])")
_EDGE_PUNCTUATION = re.compile(r"^(\W*)(.*?)(\W*)$", re.S)


@dataclass(frozen=True)
class Respelling:
    """Words ``first`` to ``last`` (inclusive) of a text are the term ``term``."""

    first: int
    last: int
    term: str


def letters(text: str) -> str:
    """Lower-case letters and digits of ``text``, accents removed."""
    plain = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in plain if c.isalnum() and not unicodedata.combining(c))


def sound_key(text: str) -> str:
    """A rough English sound key of ``text``'s letters (see the module's docstring)."""
    key = _SOFT_C.sub("s", letters(text))
    for spelling, sound in _SOUNDS:
        key = key.replace(spelling, sound)
    key = key.replace("c", "k")
    key = _VOWELS.sub("a", key)
    key = "".join(ch for n, ch in enumerate(key) if n == 0 or ch != key[n - 1])
    return key[:1] + key[1:].replace("h", "") if len(key) > 1 else key


def similarity(a: str, b: str) -> float:
    """1 - edit distance / the longer length (1.0 for two empty strings)."""
    return float(Levenshtein.normalized_similarity(a, b))


def _score(heard: Sequence[str], term: str) -> float:
    """How surely the words ``heard`` are ``term`` (0: they are not)."""
    if letters(heard[0]) in FUNCTION_WORDS or letters(heard[-1]) in FUNCTION_WORDS:
        return 0.0  # a term is not heard as "for"; nor as "if we" or "metaprool for"
    heard_letters, term_letters = letters("".join(heard)), letters(term)
    if not heard_letters:
        return 0.0
    if heard_letters == term_letters:
        return 2.0  # the same letters, spaced or cased otherwise: always the term
    heard_key, term_key = sound_key(heard_letters), sound_key(term_letters)
    if min(len(heard_key), len(term_key)) < MIN_FUZZY_KEY:
        return 1.0 if heard_key == term_key and similarity(heard_letters, term_letters) >= LETTER_SIMILARITY else 0.0
    key_score = similarity(heard_key, term_key)
    if key_score < KEY_SIMILARITY or similarity(heard_letters, term_letters) < LETTER_SIMILARITY:
        return 0.0
    return key_score


def closest_terms(heard: str, terms: Sequence[str], count: int) -> list[str]:
    """The ``count`` terms that come nearest to some run of ``heard``'s words (by sound
    key or letters; the list's order breaks ties), in the list's order. As in
    ``find_respellings``, a run that begins or ends with a function word is no term's
    (else "at" would choose Aoife, and every short term would be near "the")."""
    words = [w for w in (letters(_core(w)) for w in heard.split()) if w]
    widest = max((len(t.split()) for t in terms), default=0) + EXTRA_WORDS + 1
    spans: dict[int, list[tuple[str, str]]] = {}  # by word count: each run's letters and sound key
    for size in range(1, widest + 1):
        runs = {"".join(run) for run in (words[first:first + size] for first in range(len(words) - size + 1))
                if run[0] not in FUNCTION_WORDS and run[-1] not in FUNCTION_WORDS}
        spans[size] = [(run, sound_key(run)) for run in runs]
    nearness: list[tuple[float, int]] = []
    for position, term in enumerate(terms):
        term_letters = letters(term)
        term_key = sound_key(term_letters)
        best = 0.0
        for size in range(1, len(term.split()) + EXTRA_WORDS + 2):
            for run, key in spans.get(size, ()):
                best = max(best, similarity(run, term_letters), similarity(key, term_key))
        nearness.append((-best, position))
    return [terms[position] for _, position in sorted(sorted(nearness)[:count], key=lambda n: n[1])]


def find_respellings(words: Sequence[str], terms: Sequence[str]) -> list[Respelling]:
    """Non-overlapping spans of ``words`` that are near misses of ``terms``, best first
    taken; a span already spelled as its term is left out."""
    candidates: list[tuple[float, int, Respelling]] = []
    for term in terms:
        width = len(term.split()) + EXTRA_WORDS
        for first in range(len(words)):
            for last in range(first, min(len(words), first + width)):
                span = [_core(w) for w in words[first:last + 1]]
                score = _score(span, term)
                if score > 0:
                    # prefer the better score, then the span whose size is the term's
                    size_miss = abs(len(span) - len(term.split()))
                    candidates.append((score, -size_miss, Respelling(first, last, term)))
    taken: list[Respelling] = []
    for _, _, found in sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True):
        if all(found.last < t.first or found.first > t.last for t in taken):
            taken.append(found)
    return sorted((t for t in taken if " ".join(_core(w) for w in words[t.first:t.last + 1]) != t.term),
                  key=lambda t: t.first)


def respell_words(words: Sequence[str], terms: Sequence[str]) -> tuple[list[str], list[Respelling]]:
    """``words`` with each near miss of a term written as the term (the first word's
    leading and the last word's trailing punctuation kept), and the respellings made."""
    found = find_respellings(words, terms)
    out: list[str] = []
    position = 0
    for r in found:
        out += words[position:r.first]
        lead = _EDGE_PUNCTUATION.match(words[r.first])
        trail = _EDGE_PUNCTUATION.match(words[r.last])
        assert lead is not None and trail is not None
        out.append(f"{lead.group(1)}{r.term}{trail.group(3)}")
        position = r.last + 1
    out += words[position:]
    return out, found


def respell_text(text: str, terms: Sequence[str]) -> str:
    """``text`` with the near misses of ``terms`` written as the terms."""
    if not terms:
        return text
    words, found = respell_words(text.split(), terms)
    return " ".join(words) if found else text


def _core(word: str) -> str:
    match = _EDGE_PUNCTUATION.match(word)
    assert match is not None
    return match.group(2)


def respell_transcript(text: str, words: list[Word], terms: Sequence[str]) -> tuple[str, list[Word]]:
    """A decode's text and timed words with the near misses of ``terms`` written as the
    terms. When the timed words are the text's words one for one, a respelled span
    becomes one timed word from its first word's start to its last word's end."""
    if not terms:
        return text, words
    split = text.split()
    respelled, found = respell_words(split, terms)
    if not found:
        return text, words
    if len(words) == len(split):
        timed: list[Word] = []
        position = 0
        for r in found:
            timed += words[position:r.first]
            span = words[r.first:r.last + 1]
            timed.append(Word("", span[0].start, span[-1].end, min(w.probability for w in span)))
            position = r.last + 1
        timed += words[position:]
        words = [Word(_spaced(w.word, new), w.start, w.end, w.probability) for w, new in zip(timed, respelled,
                                                                                           strict=True)]
    return " ".join(respelled), words


def _spaced(decoded: str, word: str) -> str:
    """``word`` with the leading space Whisper gives its words, when the decoded word had one."""
    return f" {word}" if decoded.startswith(" ") or not decoded else word
