"""The sentence buffer: fragments in, complete sentences out as soon as they are certain."""

from __future__ import annotations

from gateway.tts.sentences import SentenceBuffer, split_sentences


def feed(buffer: SentenceBuffer, fragments: list[str]) -> list[list[str]]:
    return [buffer.append(f) for f in fragments]


def test_sentence_is_released_when_whitespace_follows_its_end():
    buffer = SentenceBuffer(max_chars=1000)
    out = feed(buffer, ["Hel", "lo there", ".", " How", " are you?", " Fine"])
    assert out == [[], [], [], ["Hello there."], [], ["How are you?"]]
    assert buffer.pending == "Fine"
    assert buffer.flush() == "Fine"
    assert buffer.flush() is None


def test_several_sentences_in_one_fragment_and_closing_quotes():
    sentences, rest = split_sentences('She said "Stop!" Then left. Wait… what?! ok')
    assert sentences == ['She said "Stop!"', "Then left.", "Wait…", "what?!"]
    assert rest == "ok"


def test_abbreviations_initials_and_decimals_do_not_split():
    sentences, rest = split_sentences("Dr. Smith paid 3.50 dollars to J. R. Tolkien, e.g. for books. Next")
    assert sentences == ["Dr. Smith paid 3.50 dollars to J. R. Tolkien, e.g. for books."]
    assert rest == "Next"


def test_newline_ends_a_list_item():
    sentences, rest = split_sentences("- first item\n- second item\n- thi")
    assert sentences == ["- first item", "- second item"]
    assert rest == "- thi"


def test_run_on_text_is_cut_at_a_clause_break():
    buffer = SentenceBuffer(max_chars=1000, soft_max_chars=40)
    out = buffer.append("one two three four five, six seven eight nine ten eleven twelve")
    assert out == ["one two three four five,"]
    assert buffer.pending == "six seven eight nine ten eleven twelve"


def test_run_on_text_without_clause_break_is_cut_at_a_space():
    buffer = SentenceBuffer(max_chars=1000, soft_max_chars=20)
    out = buffer.append("aaaa bbbb cccc dddd eeee ffff")
    assert out == ["aaaa bbbb cccc dddd"]
    assert buffer.pending == "eeee ffff"


def test_unfinished_text_never_exceeds_the_utterance_limit():
    buffer = SentenceBuffer(max_chars=10, soft_max_chars=400)
    assert buffer.append("abcdefgh") == []
    assert buffer.append("ijklmnop") == ["abcdefghij"]
    assert buffer.pending == "klmnop"


def test_clear_drops_pending_text():
    buffer = SentenceBuffer(max_chars=100)
    buffer.append("half a sent")
    buffer.clear()
    assert buffer.flush() is None
