"""Text heard from audio played (gateway/tts/spans.py): a word is heard once its
midpoint has played, by exact word marks, by sparse marks whose words share the
audio by their letters, and by the estimate past the last mark."""

from __future__ import annotations

import pytest

from engines.timing import SpokenMark
from gateway.tts.spans import ESTIMATE_MS_PER_CHAR, split_text

TEXT = "Hello there, my friend. How are you?"
# word ends: Hello 0-100 (midpoint 50), there, 100-200 (150), my 200-260 (230), friend. 260-400 (330),
# How 400-480 (440), are 480-540 (510), you? 540-700 (620)
WORDS = [SpokenMark(5, 100), SpokenMark(12, 200), SpokenMark(15, 260), SpokenMark(23, 400),
         SpokenMark(27, 480), SpokenMark(31, 540), SpokenMark(36, 700)]


@pytest.mark.parametrize(("played", "spoken"), [
    (0, ""), (49, ""), (50, "Hello"), (149, "Hello"), (150, "Hello there,"), (200, "Hello there,"),
    (329, "Hello there, my"), (330, "Hello there, my friend."), (619, "Hello there, my friend. How are"),
    (620, TEXT), (10_000, TEXT)])
def test_exact_marks_count_a_word_once_its_midpoint_has_played(played, spoken):
    split = split_text(TEXT, played, WORDS, word_exact=True, total=None, rate=1000)
    assert (split.spoken, split.remaining) == (spoken, TEXT[len(spoken):])


@pytest.mark.parametrize(("played", "spoken"), [(59, ""), (60, "Hi"), (239, "Hi"), (240, "Hi there")])
def test_a_word_whose_first_sound_is_marked_is_heard_at_the_midpoint_of_its_own_audio(played, spoken):
    # "Hi" sounds 20-100, a pause, "there" 180-300 (midpoint 240, not 200 as from the previous mark)
    marks = [SpokenMark(2, 100, 20), SpokenMark(8, 300, 180)]
    assert split_text("Hi there", played, marks, word_exact=True, total=None, rate=1000).spoken == spoken


def test_a_written_word_the_engine_ends_twice_is_heard_at_the_midpoint_of_all_its_audio():
    text = "It costs 42 now"  # "42" said as "forty two": two marks end it, 200-300 and 300-400
    marks = [SpokenMark(2, 100), SpokenMark(8, 200), SpokenMark(11, 300, 220), SpokenMark(11, 400, 320),
             SpokenMark(15, 500)]
    # "42" sounds from 220 (forty's first sound) to 400: midpoint 310
    assert split_text(text, 309, marks, word_exact=True, total=None, rate=1000).spoken == "It costs"
    assert split_text(text, 310, marks, word_exact=True, total=None, rate=1000).spoken == "It costs 42"


def test_the_whole_audio_played_is_the_whole_text_even_with_trailing_space():
    text = "Hi there. "
    split = split_text(text, 900, [SpokenMark(2, 300), SpokenMark(9, 800)], word_exact=True, total=900, rate=1000)
    assert (split.spoken, split.remaining) == (text, "")


@pytest.mark.parametrize(("played", "spoken"), [
    (0, ""), (99, ""), (100, "Hello"), (479, "Hello there,"), (480, "Hello there, my"),
    (660, "Hello there, my friend."), (979, "Hello there, my friend. How"), (980, "Hello there, my friend. How are"),
    (1119, "Hello there, my friend. How are"), (1120, TEXT)])
def test_between_sentence_marks_the_words_share_the_audio_by_their_letters(played, spoken):
    # one mark per sentence (OmniVoice), and the whole audio once done: 40 samples a letter in both,
    # "Hello there, my friend." (20 letters) in 0-800, "How are you?" (10) in 800-1200
    split = split_text(TEXT, played, [SpokenMark(23, 800)], word_exact=False, total=1200, rate=1000)
    assert (split.spoken, split.remaining) == (spoken, TEXT[len(spoken):])


@pytest.mark.parametrize(("chars", "played_off", "spoken"), [
    (9, -1, "Hello"), (9, 0, "Hello there,"), (12, 0, "Hello there,")])
def test_past_the_last_mark_of_an_unfinished_utterance_the_characters_go_at_the_estimated_rate(chars, played_off,
                                                                                                spoken):
    rate = 24000
    played = round(chars * ESTIMATE_MS_PER_CHAR * rate / 1000) + played_off  # "there," is characters 6-12: middle 9
    split = split_text(TEXT, played, [], word_exact=False, total=None, rate=rate)
    assert (split.spoken, split.remaining) == (spoken, TEXT[len(spoken):])


def test_past_the_last_word_mark_of_an_unfinished_utterance_nothing_more_is_heard():
    split = split_text(TEXT, 10_000, WORDS[:4], word_exact=True, total=None, rate=1000)
    assert split.spoken == "Hello there, my friend."
