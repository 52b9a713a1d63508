"""The word error rate spells numbers out, so a recognizer writing digits is not charged for it."""

from __future__ import annotations

import pytest

from tests.support.speech import word_errors, words
from tests.support.spoken import cardinal, expand_contractions, ordinal


@pytest.mark.parametrize(("written", "spoken"), [
    ("Please call Dr. Patel before 9:30 tomorrow.", "please call doctor patel before nine thirty tomorrow"),
    ("He paid $40 for it.", "he paid forty dollars for it"),
    ("Sales grew by 15%.", "sales grew by fifteen percent"),
    ("It was built in 1950.", "it was built in nineteen fifty"),
    ("The rent is due on the 5th.", "the rent is due on the fifth"),
    ("There are 365 days.", "there are three hundred sixty five days"),
    ("Meet at 7:05, not 2.10.", "meet at seven oh five not two ten"),
    ("1,200 people", "one thousand two hundred people"),
    ("the 1st of January", "the first of january"),
    ("It's OK.", "it's okay"),
])
def test_numbers_and_titles_are_spelled_as_spoken(written, spoken):
    assert words(written) == spoken.split()


def test_a_reference_in_words_matches_a_hypothesis_in_digits():
    assert word_errors("We counted ninety nine birds at the lake.", "We counted 99 birds at the lake") == (0, 8)
    assert word_errors("forty five minutes", "45 minutes late") == (1, 3)


def test_cardinals_and_ordinals():
    assert [cardinal(n) for n in (0, 13, 40, 101, 2024)] == [
        "zero", "thirteen", "forty", "one hundred one", "two thousand twenty four"]
    assert [ordinal(n) for n in (1, 2, 3, 5, 12, 20, 21)] == [
        "first", "second", "third", "fifth", "twelfth", "twentieth", "twenty first"]


@pytest.mark.parametrize(("written", "spoken"), [
    ("And here's the second sentence.", "and here is the second sentence."),
    ("We won't stop, they can't, I'm sure you're right and we'll see what they've done.",
     "we will not stop, they can not, i am sure you are right and we will see what they have done."),
    ("Let\u2019s go; it's late.", "let us go; it is late."),
    ("The dog's bowl isn't empty.", "the dog's bowl is not empty."),  # a possessive stays
])
def test_contractions_are_written_out_and_possessives_kept(written, spoken):
    assert expand_contractions(written) == spoken
