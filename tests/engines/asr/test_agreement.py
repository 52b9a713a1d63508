"""LocalAgreement: what becomes stable, and that stable only grows."""

from __future__ import annotations

import itertools

import pytest

import engines.asr.agreement as agreement_module
from engines.asr.agreement import HOLD_BACK, Agreement

SENTENCE = "the old baker opens his shop at five and sells out by noon".split()


def test_words_become_stable_once_three_hypotheses_agree_and_six_words_follow_them_in_each():
    assert HOLD_BACK == 6
    a = Agreement()
    assert a.update(SENTENCE[:7]) == SENTENCE[:7]
    a.update(SENTENCE[:8])
    assert a.stable == ""
    a.update(SENTENCE[:9])  # 7, 8 and 9 words: one word has six after it in all three
    assert a.stable == "the"
    a.update(SENTENCE[:10])
    assert a.stable == "the old"
    a.update(SENTENCE[:13])
    assert a.stable == "the old baker"  # the oldest of the three still has only nine words


def test_three_agreeing_hypotheses_cut_short_commit_nothing():
    a = Agreement()
    for n in (4, 5, 6, 6):
        a.update(SENTENCE[:n])
    assert a.stable == ""


def test_a_word_three_partials_got_wrong_the_same_way_stays_open_until_more_speech_follows_it(monkeypatch):
    partials = ("The doctor asks, how long the cough", "The doctor asks, how long the cough head left",
                "The doctor asks, how long the cough had lasted")
    a = Agreement()
    for text in partials:
        a.update(text.split())
    assert a.stable == "The"  # "asks," has at most six words after it in the oldest
    a.update("The doctor asked how long the cough had lasted and listened".split())
    assert a.stable == "The doctor"  # the newest hears "asked": the wrong word never became stable
    # committing every word but the newest's last, the same partials make "asks," stable
    monkeypatch.setattr(agreement_module, "HOLD_BACK", 1)
    monkeypatch.setattr(agreement_module, "HOLD_BACK_EARLIER", 0)
    eager = Agreement()
    for text in partials:
        eager.update(text.split())
    assert eager.stable == "The doctor asks, how long the cough"


def test_a_word_two_hypotheses_got_wrong_the_same_way_is_not_committed_when_the_third_fixes_it():
    a = Agreement()
    a.update("I can roll the state in the early days of".split())
    a.update("I can roll the state in the early days of the".split())
    a.update("A king ruled the state in the early days of the war".split())
    assert a.stable == ""
    a.update("A king ruled the state in the early days of the war and".split())
    a.update("A king ruled the state in the early days of the war and he".split())
    assert a.stable == "A king ruled the state in"


def test_agreement_of_two_commits_one_hypothesis_sooner():
    a = Agreement(agree=2)
    a.update(SENTENCE[:8])
    a.update(SENTENCE[:9])
    assert a.stable == "the old"


def test_case_and_punctuation_do_not_break_agreement_and_committed_spelling_stays():
    a = Agreement(agree=2)
    tail = "and the rest of it".split()
    a.update(["hello,", "world", *tail, "now"])
    a.update(["Hello", "world", "again", *tail])
    assert a.stable == "Hello world"
    assert a.update(["HELLO,", "WORLD", "again", *tail]) == ["Hello", "world", "again", *tail]


def test_a_hypothesis_that_contradicts_the_stable_words_keeps_them():
    a = Agreement(["the", "quick"])
    assert a.update("a slow".split()) == ["the", "quick"]
    assert a.update("the slow brown fox".split()) == ["the", "quick", "brown", "fox"]
    assert a.stable == "the quick"


@pytest.mark.parametrize("hold_back", [1, HOLD_BACK])
def test_stable_never_shrinks_over_a_sequence_of_hypotheses(monkeypatch, hold_back):
    monkeypatch.setattr(agreement_module, "HOLD_BACK", hold_back)
    monkeypatch.setattr(agreement_module, "HOLD_BACK_EARLIER", hold_back)
    a = Agreement()
    seen = []
    hypotheses = [" ".join(SENTENCE[:n]) for n in range(1, 14)]
    hypotheses[5] = "won"
    hypotheses[9] = "the old bakers open"
    for text in hypotheses:
        a.update(text.split())
        seen.append(a.stable)
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
    assert seen[-1] == " ".join(SENTENCE[:13 - hold_back - 2])
