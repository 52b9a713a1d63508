"""Piper's words timed by its own phoneme durations (engines/piper/alignment.py),
and the marks a real voice's stream carries."""

from __future__ import annotations

import numpy as np
import pytest

from engines.piper.alignment import PiperTimeline, match_words, phoneme_word_ends, phoneme_word_spans, word_boundaries
from engines.timing import SpokenMark

GAP, PAD, BOS, EOS = 3, 0, 1, 2


def ids(*words: list[int]) -> list[int]:
    """Piper's id layout: the start mark, each phoneme followed by a pad, words joined by the gap, the end mark."""
    out = [BOS, PAD]
    for k, word in enumerate(words):
        if k:
            out += [GAP, PAD]
        for phoneme in word:
            out += [phoneme, PAD]
    return [*out, EOS]


QUIET = frozenset({PAD, BOS, EOS})


def test_words_end_at_each_gap_and_the_last_at_the_sentence_end():
    sentence = ids([10, 11], [12], [13, 14, 15])
    assert word_boundaries(sentence, GAP, QUIET) == [6, 10, len(sentence)]
    samples = list(range(1, len(sentence) + 1))
    ends = phoneme_word_ends(sentence, samples, GAP, QUIET)
    assert ends == [sum(samples[:6]), sum(samples[:10]), sum(samples)]
    # each starts at its first phoneme: the start mark, pads and the gap before it are pauses
    assert phoneme_word_spans(sentence, samples, GAP, QUIET) == [
        (sum(samples[:2]), ends[0]), (sum(samples[:8]), ends[1]), (sum(samples[:12]), ends[2])]


def test_a_gap_after_nothing_but_quiet_ids_makes_no_word():
    assert word_boundaries([BOS, PAD, GAP, PAD, 10, PAD, GAP, PAD, GAP, PAD, 11, PAD, EOS], GAP, QUIET) == [6, 13]


def timeline(text: str, sentences: int, sounds: dict[str, int]) -> PiperTimeline:
    """A timeline whose text words sound like ``sounds`` says (phonemes per word)."""
    return PiperTimeline(text, sentences, GAP, QUIET, lambda word: sounds[word.strip()])


def test_each_sentence_takes_its_words_and_the_last_mark_ends_the_text():
    text = "Hi there. Go on! "
    marks = timeline(text, 2, {"Hi": 2, "there.": 4, "Go": 2, "on!": 3})
    first = ids([10, 11], [12, 13, 14, 15])
    second = ids([16, 17], [18, 19, 20])
    assert marks.sentence_marks(first, [100] * len(first)) == [SpokenMark(2, 600, 200), SpokenMark(9, 1700, 800)]
    assert marks.sentence_marks(second, [10] * len(second)) == [SpokenMark(12, 60, 20),
                                                                SpokenMark(len(text), 150, 80)]


def test_words_espeak_runs_together_end_together():
    text = "sat on the mat."
    marks = timeline(text, 1, {"sat": 3, "on": 2, "the": 2, "mat.": 4})
    sentence = ids([10, 11, 12], [13, 14, 15, 16], [17, 18, 19, 20])  # "on the" is one phoneme word
    assert [m.char_end for m in marks.sentence_marks(sentence, [1] * len(sentence))] == [3, 10, 15]


def test_a_word_espeak_spells_as_several_is_ended_by_one_of_them():
    text = "In 42 days"
    marks = timeline(text, 1, {"In": 2, "42": 9, "days": 4})
    sentence = ids([10, 11], [12, 13, 14, 15, 16], [17, 18, 19], [20, 21, 22, 23])  # in forty two days
    ends = [m.char_end for m in marks.sentence_marks(sentence, [1] * len(sentence))]
    assert ends[0] == 2 and ends[2] == 5 and ends[-1] == 10 and ends == sorted(ends)


def test_a_text_word_without_sounds_rides_with_the_word_before_it():
    text = "Wait - what?"
    marks = timeline(text, 1, {"Wait": 3, "-": 0, "what?": 4})
    sentence = ids([10, 11, 12], [13, 14, 15, 16])
    assert [m.char_end for m in marks.sentence_marks(sentence, [1] * len(sentence))] == [6, 12]


def test_durations_that_do_not_fit_the_ids_give_no_marks():
    sentence = ids([10], [11])
    marks = timeline("a b", 1, {"a": 1, "b": 1})
    assert marks.sentence_marks(sentence, [10] * (len(sentence) - 1)) == []


@pytest.mark.slow
@pytest.mark.parametrize("graph", ["fast", "stock"])
async def test_the_bundled_voice_marks_every_word_at_the_end_of_its_audio(graph):
    from engines.piper.engine import PiperEngine

    text = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
    engine = PiperEngine(threads=2, graph=graph)
    await engine.load()
    try:
        stream = engine.open_stream(text)
        frames = [f async for f in stream.frames()]
    finally:
        await engine.close()
    total = sum(len(f) for f in frames)
    first_sentence = next(i for i, f in enumerate(frames) if len(f) < 1764)  # a sentence's last frame is short
    first_sentence_samples = sum(len(f) for f in frames[:first_sentence + 1])
    assert stream.word_exact
    # espeak says "on the" as one word (ɔnðə): it ends with "the"
    assert [m.char_end for m in stream.marks] == [3, 9, 15, 20, 27, 34, 42, 47, 51, 57, 60, 64, 69, 74, len(text)]
    samples = [m.sample for m in stream.marks]
    assert samples == sorted(set(samples)) and samples[-1] == total
    assert samples[6] == first_sentence_samples  # "planks." ends with the first sentence's audio
    assert all(np.diff(samples) >= 1102)  # every word lasts at least 50 ms


def test_phoneme_words_pair_with_the_text_words_whose_counts_they_match_in_order():
    # "It's easy to tell the depth": said alone 3 5 3 4 2 5; in the sentence "to" is reduced (tə, 2)
    assert match_words([3, 5, 2, 4, 2, 5], [3, 5, 3, 4, 2, 5]) == [0, 1, 2, 3, 4, 5]
    assert match_words([3, 4, 4], [3, 2, 2, 4]) == [0, 2, 3]  # "sat on the mat.": "on the" said as one
    assert match_words([2, 5, 3, 4], [2, 9, 4]) == [0, 1, 1, 2]  # "In 42 days": "forty two"


def test_a_sentence_takes_its_words_up_to_its_end_when_short_words_said_alone_count_more():
    text = "A large size is hard to sell. A rod is used."
    # said alone "A" is ˈeɪ (3), in the sentence ɐ (1): by the counts alone the first sentence stops before "sell."
    marks = timeline(text, 2, {"A": 3, "large": 7, "size": 5, "is": 2, "hard": 6, "to": 3, "sell.": 5, "rod": 4,
                               "used.": 5})
    first = ids([10], [11] * 6, [12] * 5, [13] * 2, [14] * 5, [15] * 2, [16] * 5)
    assert [m.char_end for m in marks.sentence_marks(first, [1] * len(first))] == [1, 7, 12, 15, 20, 23, 29]
    second = ids([10], [17] * 3, [13] * 2, [18] * 5)
    assert [m.char_end for m in marks.sentence_marks(second, [1] * len(second))] == [31, 35, 38, len(text)]
