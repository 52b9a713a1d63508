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

Plain data on the sidecar's main thread, like the policy that owns it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class StreamContext:
    def __init__(self, vocabulary: str, context_words: int, terms: tuple[str, ...] = ()) -> None:
        self.vocabulary = vocabulary
        self.terms = terms  # how the client spells its terms: results are written so (term_spelling.py)
        self.context_words = context_words
        self.recent: list[str] = []  # the last words of the finals sent (at most ``context_words``)
        self._language: str | None = None

    @property
    def prompt(self) -> str:
        """The text a decode handed out now is conditioned on: the vocabulary, then the recent text."""
        return " ".join(p for p in (self.vocabulary, " ".join(self.recent)) if p)

    def configure(self, vocabulary: str, reset: bool = False, terms: tuple[str, ...] = ()) -> None:
        self.vocabulary = vocabulary
        self.terms = terms
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
