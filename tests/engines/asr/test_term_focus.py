"""A long term list is narrowed, for a final, to the terms nearest to what the
utterance's newest partial heard: partials get the whole list, the final (and a
speculative final) the nearest ``FOCUS_TERMS``, or the whole list when no partial
heard anything; a free prompt in front of the list and the stream's recent text
stay; short lists and free prompts are left whole."""

from __future__ import annotations

from engines.asr.context import FOCUS_TERMS, StreamContext
from engines.asr.decoder import Transcript
from engines.asr.prompt_text import term_list_text
from engines.asr.term_spelling import closest_terms
from tests.engines.asr.test_policy import feed_seconds
from tests.engines.asr.test_prompt import make

TERMS = ("Thandiwe", "Supabase", "Okonkwo", "pgvector", "ComfyUI", "Grigory", "metoprolol", "Krzysztof",
         "Aoife", "Eilidh", "Vercel", "Reykjavik")


def test_the_nearest_terms_are_chosen_by_sound_and_letters_and_keep_the_lists_order():
    assert FOCUS_TERMS == 3
    # "Tandi with" is Thandiwe's; "cafe" comes nearest to ComfyUI, "at" to Aoife
    assert closest_terms("We met Tandi with at the cafe.", TERMS, 3) == ["Thandiwe", "ComfyUI", "Aoife"]
    assert closest_terms("Ask Akonkwo to join.", TERMS, 1) == ["Okonkwo"]
    assert closest_terms("Store it with pg vector on Versel.", TERMS, 2) == ["pgvector", "Vercel"]
    # nothing near: the list's first terms (ties keep the order)
    assert closest_terms("", TERMS, 2) == ["Thandiwe", "Supabase"]


def test_partials_get_the_whole_list_and_the_final_the_terms_nearest_to_the_newest_partial():
    whole = term_list_text(TERMS)
    policy = make([(1.0, 4.0)], prompt=whole, terms=TERMS)
    now = [0.0]
    feed_seconds(policy, 1.6, now)
    first = policy.take_job()
    assert (first.kind, first.prompt) == ("partial", whole)
    policy.on_result(first, Transcript(text="Ask Akonkwo to", language="en"), now[0])
    feed_seconds(policy, 1.0, now)
    second = policy.take_job()
    assert (second.kind, second.prompt) == ("partial", whole)
    policy.on_result(second, Transcript(text="Ask Okonkwo to join Versel", language="en"), now[0])
    feed_seconds(policy, 2.0, now)
    final = policy.take_job()
    assert final.kind == "final"
    nearest = closest_terms("Ask Okonkwo to join Versel", TERMS, FOCUS_TERMS)
    assert "Okonkwo" in nearest and "Vercel" in nearest and len(nearest) == FOCUS_TERMS
    assert final.prompt == term_list_text(nearest)


def test_an_eager_streams_speculative_final_gets_the_nearest_terms_too():
    policy = make([(1.0, 4.0)], prompt=term_list_text(TERMS), terms=TERMS, eager=True)
    now = [0.0]
    feed_seconds(policy, 2.6, now)
    partial = policy.take_job()
    assert partial.kind == "partial"
    policy.on_result(partial, Transcript(text="We met Tandi with", language="en"), now[0])
    for _ in range(30):  # into the pause: the speculative final comes due before the silence window closes
        feed_seconds(policy, 0.1, now)
        job = policy.take_job()
        if job is not None and job.kind == "final":
            break
        if job is not None:
            policy.on_result(job, Transcript(text="We met Tandi with", language="en"), now[0])
    assert job is not None and job.kind == "final" and job.generation >= 0  # the speculation, not the closed final
    assert job.prompt == term_list_text(closest_terms("We met Tandi with", TERMS, FOCUS_TERMS))


def test_an_utterance_no_partial_heard_gets_the_whole_list_in_its_final():
    policy = make([(1.0, 3.0)], prompt=term_list_text(TERMS), terms=TERMS, interim=False)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    final = policy.take_job()
    assert (final.kind, final.prompt) == ("final", term_list_text(TERMS))


def test_a_free_prompt_before_the_list_and_the_recent_text_stay():
    context = StreamContext(f"Minutes of the standup. {term_list_text(TERMS)}", context_words=4, terms=TERMS)
    context.recent = ["we", "met", "at", "noon."]
    assert context.prompt_for("Ask Akonkwo") == (
        f"Minutes of the standup. {term_list_text(closest_terms('Ask Akonkwo', TERMS, FOCUS_TERMS))} "
        "we met at noon.")
    assert context.prompt == f"Minutes of the standup. {term_list_text(TERMS)} we met at noon."


def test_a_short_list_or_a_prompt_without_the_list_is_left_whole():
    short = TERMS[:FOCUS_TERMS]
    assert StreamContext(term_list_text(short), 0, short).prompt_for("Ask Akonkwo") == term_list_text(short)
    # the terms and a vocabulary that does not end with their list (a client's own prompt)
    context = StreamContext("Talk about Okonkwo and Thandiwe.", 0, TERMS)
    assert context.prompt_for("Ask Akonkwo") == "Talk about Okonkwo and Thandiwe."


def test_configure_narrows_the_new_list_not_the_old_one():
    context = StreamContext(term_list_text(TERMS), 0, TERMS)
    assert "Okonkwo" in context.prompt_for("Ask Akonkwo")
    others = ("Llanelli", "Szczecin", "Xiomara", "Zyxel", "Siobhan")
    context.configure(term_list_text(others), terms=others)
    assert context.prompt_for("Ask Akonkwo") == term_list_text(closest_terms("Ask Akonkwo", others, FOCUS_TERMS))
