"""LocalAgreement-2: what becomes stable, and that stable only grows."""

from __future__ import annotations

import itertools

from engines.asr.agreement import Agreement


def test_words_agreed_by_two_hypotheses_become_stable_except_the_last():
    a = Agreement()
    assert a.update("the quick".split()) == ["the", "quick"]
    assert a.stable == ""
    a.update("the quick brown".split())
    assert a.stable == "the quick"
    a.update("the quick brown fox".split())
    assert a.stable == "the quick brown"


def test_case_and_punctuation_do_not_break_agreement_and_committed_spelling_stays():
    a = Agreement()
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
    for text in ["one", "one two", "one two three", "won", "one two three four", "one two three four five"]:
        a.update(text.split())
        seen.append(a.stable)
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen))
    assert seen[-1] == "one two three four"
