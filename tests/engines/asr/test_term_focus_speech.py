"""A stream with a long term list, on real speech (espeak-ng, the same audio every
run, through the streaming policy and the bundled tiny.en): the final of a
sentence that says a term reads it, and the final of an ordinary sentence is not
pulled toward the list. With the whole 28-term list in every decode's context
(finals included), the first reads "reside in potent" and the second "The
Siobhanaflop from the Mary started."."""

from __future__ import annotations

import numpy as np
import pytest

from bench.vocabulary import TERMS, say
from engines.asr.prompt_text import term_list_text
from engines.asr.utterance import StreamOptions
from tests.engines.asr.test_streaming_accuracy import decoder
from tests.support.policy_replay import decode_job, stream_finals
from tests.support.speech import silence, word_errors

pytestmark = pytest.mark.slow


def finals_with_the_list(text: str) -> str:
    audio = np.concatenate([silence(0.5), say(text, "espeak"), silence(1.5)]).astype(np.float32)
    options = StreamOptions(prompt=term_list_text(TERMS), terms=tuple(TERMS))
    return " ".join(stream_finals(lambda job: decode_job(decoder(), job), audio, options))


def test_a_term_said_in_a_sentence_is_read_with_a_long_list():
    assert len(TERMS) == 28
    assert finals_with_the_list("Make sure the retry handler is idempotent.") == (
        "Make sure the retry handler is idempotent.")


def test_an_ordinary_sentence_is_not_pulled_toward_a_long_list():
    said = "The show was a flop from the very start."
    heard = finals_with_the_list(said)
    assert not any(term.lower() in heard.lower() for term in TERMS)
    assert word_errors(said, heard)[0] <= 1, heard  # "won a flop": tiny.en's own slip, without terms too
