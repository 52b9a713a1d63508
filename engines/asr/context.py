"""What a stream's decodes are conditioned on: its vocabulary and its recent text.

Whisper reads text before an utterance (its previous-text slot) as what was
said before it, and leans toward those words and that spelling. A stream gives
it two things there: its vocabulary (``vocabulary``: the client's terms or
prompt, as the gateway wrote them; ``configure`` replaces it) and, with
``PolicyTuning.context_words``, the last words of the finals it has sent (as
offline decoding conditions each window on the text before it). The recent text
is forgotten when a final's language differs from the one before it, and on
the gateway's request. A decode job takes the ``prompt`` as it stands when the
job is handed out. The stream's ``terms`` (the client's own spelling of its
terms) travel with the vocabulary: finals and eager finals are written with them
(term_spelling.py), so a near miss is spelled as the client spells it.

A long term list helps each term less than a short one, and biases the words
around it more: Whisper leans toward every listed word. So when the vocabulary
ends with the term list (``term_list_text``, as the gateway writes it) and the
list is longer than ``FOCUS_TERMS``, a final (and a speculative final) gets only
the ``FOCUS_TERMS`` terms nearest to what the utterance's newest partial heard
(``closest_terms``). Partials keep the whole list: they are where a term is
heard at all, and a partial that had narrowed the list by the words heard so
far would miss a term said after them. An utterance with no partial gets the
whole list in its final too.

Plain data on the sidecar's main thread, like the policy that owns it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .prompt_text import term_list_text
from .term_spelling import closest_terms

FOCUS_TERMS = 3  # terms in a final's context, when a partial heard words to choose them by


class StreamContext:
    def __init__(self, vocabulary: str, context_words: int, terms: tuple[str, ...] = ()) -> None:
        self.vocabulary = vocabulary
        self.terms = terms  # how the client spells its terms: results are written so (term_spelling.py)
        self.context_words = context_words
        self.recent: list[str] = []  # the last words of the finals sent (at most ``context_words``)
        self._language: str | None = None
        self._focus = ("", "")  # the last hypothesis a term list was narrowed for, and that list's text

    @property
    def prompt(self) -> str:
        """The text a decode handed out now is conditioned on: the vocabulary, then the recent text."""
        return self.prompt_for("")

    def prompt_for(self, heard: str) -> str:
        """``prompt`` for a decode of an utterance whose newest hypothesis is ``heard``:
        the term list narrowed to the terms nearest to it (see the module's docstring)."""
        return " ".join(p for p in (self._vocabulary_for(heard), " ".join(self.recent)) if p)

    def _vocabulary_for(self, heard: str) -> str:
        full_list = term_list_text(self.terms)
        if not heard.strip() or len(self.terms) <= FOCUS_TERMS or not self.vocabulary.endswith(full_list):
            return self.vocabulary
        if self._focus[0] != heard:
            self._focus = (heard, term_list_text(closest_terms(heard, self.terms, FOCUS_TERMS)))
        head = self.vocabulary[:-len(full_list)].strip()
        return f"{head} {self._focus[1]}" if head else self._focus[1]

    def configure(self, vocabulary: str, reset: bool = False, terms: tuple[str, ...] = ()) -> None:
        self.vocabulary = vocabulary
        self.terms = terms
        self._focus = ("", "")
        if reset:
            self.recent = []

    def remember(self, events: Iterable[dict[str, Any]]) -> None:
        """Keep the words of the finals among ``events`` (the policy's outgoing events)."""
        if not self.context_words:
            return
        for event in events:
            if event["ev"] == "final" and event["text"]:
                if event["language"] != self._language:
                    self.recent, self._language = [], event["language"]
                self.recent = (self.recent + event["text"].split())[-self.context_words:]
