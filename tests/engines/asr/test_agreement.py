"""LocalAgreement: what becomes stable, and that stable only grows."""

from __future__ import annotations

import itertools

from engines.asr.agreement import Agreement


def test_words_agreed_by_three_hypotheses_become_stable_except_the_last():
    a = Agreement()
    assert a.update("the quick".split()) == ["the", "quick"]
    a.update("the quick brown".split())
    assert a.stable == ""
    a.update("the quick brown fox".split())
    assert a.stable == "the quick"
    a.update("the quick brown fox jumps".split())
    assert a.stable == "the quick brown"


def test_a_word_two_hypotheses_got_wrong_the_same_way_is_not_committed_when_the_third_fixes_it():
    a = Agreement()
    a.update("I can roll".split())
    a.update("I can roll the state".split())
    a.update("A king ruled the state in".split())
    assert a.stable == ""
    a.update("A king ruled the state in the".split())
    a.update("A king ruled the state in the early".split())
    assert a.stable == "A king ruled the state in"


def test_agreement_of_two_commits_one_hypothesis_sooner():
    a = Agreement(agree=2)
    a.update("the quick".split())
    a.update("the quick brown".split())
    assert a.stable == "the quick"


def test_case_and_punctuation_do_not_break_agreement_and_committed_spelling_stays():
    a = Agreement(agree=2)
    a.update("hello, world".split())
    a.update("Hello world again".split())
    assert a.stable == "Hello world"
    assert a.update("HELLO, WORLD again and".split()) == ["Hello", "world", "again", "and"]


def test_a_hypothesis_that_contradicts_the_stable_words_keeps_them():
    a = Agreement(["the", "quick"])
    assert a.update("a slow".split()) == ["the", "quick"]
    assert a.update("the slow brown fox".split()) == ["the", "quick", "brown", "fox"]
    assert a.stable == "the quick"


def test_stable_never_shrinks_over_a_sequence_of_hypotheses():
    a = Agreement()
    seen = []
    for text in ["one", "one two", "one two three", "won", "one two three four", "one two three four five",
                 "one two three four five six"]:
        a.update(text.split())
        seen.append(a.stable)
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
    assert seen[-1] == "one two three four"
