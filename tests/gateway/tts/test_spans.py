"""Text heard from audio played (gateway/tts/spans.py): exact word marks, sparse
marks interpolated and cut back to a word end, and the estimate past the last mark."""

from __future__ import annotations

import pytest

from engines.timing import SpokenMark
from gateway.tts.spans import ESTIMATE_MS_PER_CHAR, split_text

TEXT = "Hello there, my friend. How are you?"
WORDS = [SpokenMark(5, 100), SpokenMark(12, 200), SpokenMark(15, 260), SpokenMark(23, 400),
         SpokenMark(27, 480), SpokenMark(31, 540), SpokenMark(36, 700)]


@pytest.mark.parametrize(("played", "spoken"), [
    (0, ""), (99, ""), (100, "Hello"), (199, "Hello"), (200, "Hello there,"), (479, "Hello there, my friend."),
    (699, "Hello there, my friend. How are"), (700, TEXT), (10_000, TEXT)])
def test_exact_marks_count_a_word_once_its_audio_was_played_to_its_end(played, spoken):
    split = split_text(TEXT, played, WORDS, word_exact=True, total=None, rate=1000)
    assert (split.spoken, split.remaining) == (spoken, TEXT[len(spoken):])


def test_the_whole_audio_played_is_the_whole_text_even_with_trailing_space():
    text = "Hi there. "
    split = split_text(text, 900, [SpokenMark(2, 300), SpokenMark(9, 800)], word_exact=True, total=900, rate=1000)
    assert (split.spoken, split.remaining) == (text, "")


@pytest.mark.parametrize(("played", "spoken"), [
    (0, ""), (400, "Hello"), (799, "Hello there, my"), (800, "Hello there, my friend."),
    (1100, "Hello there, my friend. How are"), (1200, TEXT)])
def test_sentence_marks_are_interpolated_and_cut_back_to_a_word_end(played, spoken):
    # one mark per sentence (OmniVoice), and the whole audio once done
    split = split_text(TEXT, played, [SpokenMark(23, 800)], word_exact=False, total=1200, rate=1000)
    assert split.spoken == spoken and split.spoken + split.remaining == TEXT


def test_past_the_last_mark_of_an_unfinished_utterance_the_characters_go_at_the_estimated_rate():
    rate = 24000
    played = round(12 * ESTIMATE_MS_PER_CHAR * rate / 1000)  # twelve characters' worth
    split = split_text(TEXT, played, [], word_exact=False, total=None, rate=rate)
    assert split.spoken == "Hello there,"
