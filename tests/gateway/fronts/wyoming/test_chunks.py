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


def test_a_word_respelled_between_held_words_counts_as_held_and_goes_out_as_newest_spelled():
    chunker = Chunker()
    assert chunker.partial("four hours of", "") is None
    assert chunker.partial("4 hours of steady work", "") == "4 hours"
    assert chunker.partial("For hours of steady work faced", "") == " of steady"
    assert chunker.final("Four hours of steady work faced us.") == " work faced us."
    assert chunker.sent == "4 hours of steady work faced us."


def test_a_word_that_sounds_different_stops_the_agreement_even_between_held_words():
    chunker = Chunker()
    chunker.partial("Turn on the light", "")
    assert chunker.partial("Turn off the light now", "") == "Turn"
    assert chunker.sent == "Turn"


def test_two_respelled_words_in_a_row_stop_the_agreement():
    chunker = Chunker()
    chunker.partial("four hours of steady", "")
    assert chunker.partial("For ours of steady work", "") is None
    assert chunker.sent == ""


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
