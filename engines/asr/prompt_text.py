"""The text a decode is conditioned on (Whisper's previous-text slot): how much of
it the decoder takes, and how to tell a decode that copied it out from one that
heard speech."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .function_words import FUNCTION_WORDS

# Whisper's previous-text slot holds up to half its 448-token context (faster-whisper's own cap)
MAX_PROMPT_TOKENS = 223
MIN_REPEAT_WORDS = 4  # a decode that repeats this many words of its prompt in a row copied it (or half its words)
COPIED_SHARE = 0.75  # or whose words, function words aside, are this much the prompt's (in any order)


def term_list_text(terms: Iterable[str]) -> str:
    """How a term list reads in the previous-text slot: the terms, comma-separated, as one sentence."""
    joined = ", ".join(terms)
    return f"{joined}." if joined else ""


def prompt_tokens(hf_tokenizer: Any, prompt: str) -> list[int]:
    """The token ids of ``prompt`` for Whisper's previous-text slot, at most
    ``MAX_PROMPT_TOKENS`` (the end kept: the text nearest the audio matters most).
    Plain text only: the gateway refuses the characters of special tokens."""
    if not prompt.strip():
        return []
    ids: list[int] = hf_tokenizer.encode(" " + prompt.strip(), add_special_tokens=False).ids
    return ids[-MAX_PROMPT_TOKENS:]


def repeats_prompt(text: str, prompt: str) -> bool:
    """Whether ``text`` copies its ``prompt`` out rather than hearing speech: it repeats
    a run of the prompt (at least ``MIN_REPEAT_WORDS`` words in a row, and at least
    half its words, in the prompt's order), or it recites the prompt's words in any
    order: at least ``MIN_REPEAT_WORDS`` of its words, function words aside, and
    ``COPIED_SHARE`` of them, are the prompt's. The second is how a short term list
    comes out ("Grigory, Machynlleth, Machynlleth, Machynlleth." read with the list
    "Grigory, Grafana, Machynlleth."), too short for a run of four."""
    said, given = _plain_words(text), _plain_words(prompt)
    need = max(MIN_REPEAT_WORDS, (len(said) + 1) // 2)
    if len(said) >= need:
        given_runs = {tuple(given[i:i + need]) for i in range(len(given) - need + 1)}
        if any(tuple(said[i:i + need]) in given_runs for i in range(len(said) - need + 1)):
            return True
    content = [w for w in said if w not in FUNCTION_WORDS]
    given_words = set(given)
    copied = sum(w in given_words for w in content)
    return copied >= MIN_REPEAT_WORDS and copied >= COPIED_SHARE * len(content)


def _plain_words(text: str) -> list[str]:
    return [w for w in re.sub(r"[^\w']+", " ", text.lower()).split() if w]
