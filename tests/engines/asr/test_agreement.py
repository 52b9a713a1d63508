"""LocalAgreement: what becomes stable, and that stable only grows."""

from __future__ import annotations

import itertools

import pytest

from engines.asr.agreement import Agreement
from engines.asr.tuning import PolicyTuning

SENTENCE = ("send me the report by tomorrow morning so I can read it on the train before the meeting starts"
            .split())


def first(n: int) -> list[str]:
    return SENTENCE[:n]


def test_words_become_stable_once_three_hypotheses_agree_and_ten_words_follow_them_in_each():
    assert (PolicyTuning().agree, PolicyTuning().hold_back_words) == (3, 10)
    a = Agreement()
    assert a.update(first(11)) == first(11)
    a.update(first(12))
    assert a.stable == ""
    a.update(first(13))  # 11, 12 and 13 words: one word has ten after it in all three
    assert a.stable == "send"
    a.update(first(14))
    assert a.stable == "send me"
    a.update(first(19))
    assert a.stable == "send me the"  # the oldest of the three still has only thirteen words


def test_three_agreeing_hypotheses_cut_short_commit_nothing():
    a = Agreement()
    for n in (6, 8, 10, 10):
        a.update(first(n))
    assert a.stable == ""


def test_a_word_three_partials_got_wrong_the_same_way_does_not_become_stable():
    partials = ("The doctor asks, how long the cough", "The doctor asks, how long the cough head left",
                "The doctor asks, how long the cough had lasted")
    a = Agreement()
    for text in partials:
        a.update(text.split())
    assert a.stable == ""  # nothing has ten words after it yet
    assert a.update("The doctor asked how long the cough had lasted and listened to my chest".split())[2] == "asked"
    assert a.stable == ""
    # committing every word but the newest's last, the same partials make "asks," stable
    eager = Agreement(tuning=PolicyTuning(hold_back_words=1, hold_back_earlier_words=0))
    for text in partials:
        eager.update(text.split())
    assert eager.stable == "The doctor asks, how long the cough"


def test_a_word_two_hypotheses_got_wrong_the_same_way_is_not_committed_when_the_third_fixes_it():
    tail = "the state in the early days of the war and after".split()
    a = Agreement()
    a.update(["I", "can", "roll", *tail])
    a.update(["I", "can", "roll", *tail, "it"])
    a.update(["A", "king", "ruled", *tail, "it", "was"])
    assert a.stable == ""
    a.update(["A", "king", "ruled", *tail, "it", "was", "over"])
    a.update(["A", "king", "ruled", *tail, "it", "was", "over", "soon"])
    assert a.stable == "A king ruled the state in"


def test_agreement_of_two_commits_one_hypothesis_sooner():
    a = Agreement(tuning=PolicyTuning(agree=2))
    a.update(first(12))
    a.update(first(13))
    assert a.stable == "send me"


def test_case_and_punctuation_do_not_break_agreement_and_committed_spelling_stays():
    a = Agreement(tuning=PolicyTuning(agree=2))
    tail = "and the rest of it all said once more today".split()
    a.update(["hello,", "world", *tail, "now"])
    a.update(["Hello", "world", "again", *tail])
    assert a.stable == "Hello world"
    assert a.update(["HELLO,", "WORLD", "again", *tail]) == ["Hello", "world", "again", *tail]


def test_a_hypothesis_that_contradicts_the_stable_words_keeps_them():
    a = Agreement(["the", "quick"])
    assert a.update("a slow".split()) == ["the", "quick"]
    assert a.update("the slow brown fox".split()) == ["the", "quick", "brown", "fox"]
    assert a.stable == "the quick"


@pytest.mark.parametrize("hold_back", [1, 6, 10])
def test_stable_never_shrinks_over_a_sequence_of_hypotheses(hold_back):
    a = Agreement(tuning=PolicyTuning(hold_back_words=hold_back, hold_back_earlier_words=hold_back))
    seen = []
    hypotheses = [" ".join(first(n)) for n in range(1, len(SENTENCE) + 1)]
    hypotheses[5] = "sent"
    hypotheses[12] = "send me a report"
    for text in hypotheses:
        a.update(text.split())
        seen.append(a.stable)
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
    assert seen[-1] == " ".join(first(len(SENTENCE) - hold_back - 2))
