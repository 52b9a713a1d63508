"""Which words of the dictation partials become Wyoming transcript chunks."""

from __future__ import annotations

from gateway.fronts.wyoming.chunks import Chunker


def test_a_word_goes_out_once_two_partials_in_a_row_hold_it_before_their_newest_word():
    chunker = Chunker()
    assert chunker.partial("Turn", "") is None
    assert chunker.partial("Turn on", "") is None  # "Turn": one partial holds it before a newer word
    assert chunker.partial("turn, on the", "") == "turn,"  # case and punctuation do not count: agreed
    assert chunker.partial("Turn on the light", "") == " on"
    assert chunker.final("Turn on the light.") == " the light."
    assert chunker.sent == "turn, on the light."


def test_the_recognizers_stable_prefix_goes_out_at_once():
    chunker = Chunker()
    assert chunker.partial("Turn on the", "Turn on") == "Turn on"


def test_a_revised_word_stays_as_sent_and_the_final_goes_on_after_as_many_words():
    chunker = Chunker()
    for text in ("The birch", "The birch can", "The birch can use"):
        chunker.partial(text, "")
    assert chunker.sent == "The birch"
    assert chunker.partial("The birch canoe slid on", "") is None  # "canoe" differs from "can": not agreed yet
    assert chunker.final("The birch canoe slid on the smooth planks.") == " canoe slid on the smooth planks."
    assert chunker.final("Glue the sheet.") == " Glue the sheet."  # the next utterance, one space between


def test_a_final_with_fewer_words_than_were_sent_adds_nothing():
    chunker = Chunker()
    chunker.partial("one two three four", "one two three")
    assert chunker.final("One, two.") is None
    assert chunker.sent == "one two three"
