"""A final's near misses of the client's terms are written as the terms; what the
speaker really said, and function words, are left as they are; timed words follow;
the sidecar writes finals, eager finals and file transcripts with the stream's terms."""

from __future__ import annotations

import pytest

from engines.asr.decoder import Transcript, Word
from engines.asr.files import FileJob
from engines.asr.term_spelling import respell_text, respell_transcript, sound_key
from tests.engines.asr.test_policy import feed_seconds
from tests.engines.asr.test_prompt import make
from tests.engines.asr.test_server import make_server

TERMS = ("Thandiwe", "Supabase", "Okonkwo", "pgvector", "ComfyUI", "Grigory", "metoprolol", "Krzysztof",
         "Aoife", "Eilidh", "Vercel", "Reykjavik")


@pytest.mark.parametrize(("heard", "written"), [
    ("We met Tandiwe at the cafe.", "We met Thandiwe at the cafe."),
    ("Our team moved the database to Superbase last month.", "Our team moved the database to Supabase last month."),
    ("Ask Akonkwo to join the meeting at noon.", "Ask Okonkwo to join the meeting at noon."),
    ("Store the embeddings with pg vector in the same database.",
     "Store the embeddings with pgvector in the same database."),
    ("I installed comfy UI on the new laptop.", "I installed ComfyUI on the new laptop."),
    ("Gregory bought a router.", "Grigory bought a router."),
    ("The doctor prescribed metaprool for her heart.", "The doctor prescribed metoprolol for her heart."),
    ("Kristoff fixed the bike.", "Krzysztof fixed the bike."),
    ("The new build is deployed on Versel.", "The new build is deployed on Vercel."),
    ("(Rakyavik!)", "(Reykjavik!)"),  # the punctuation around the words stays
])
def test_a_near_miss_of_a_term_is_written_as_the_term(heard: str, written: str) -> None:
    assert respell_text(heard, TERMS) == written


@pytest.mark.parametrize("heard", [
    "If a person says so, we will bring the cake.",  # "if a" sounds like Aoife: function words stay
    "If we'll bring the cake to the party.",
    "Ali and Tiger are coming for dinner.",  # a short key must agree exactly: "Ali" is not Eilidh
    "We met Thandiwe at the cafe.",  # already the term
    "The database moved last month.",
])
def test_what_is_not_a_near_miss_stays_as_heard(heard: str) -> None:
    assert respell_text(heard, TERMS) == heard


def test_without_terms_nothing_changes() -> None:
    assert respell_text("We met Tandiwe.", ()) == "We met Tandiwe."


def test_sound_key_folds_vowels_doubles_and_like_sounding_letters() -> None:
    assert sound_key("Grigory") == sound_key("Gregory") == "gragara"
    assert sound_key("Supabase") == "sapabasa"
    assert sound_key("Phillip") == sound_key("Filip") == "falap"


def test_a_respelled_span_becomes_one_timed_word_across_its_words() -> None:
    words = [Word(" Store", 0.0, 0.3, 0.9), Word(" it", 0.3, 0.4, 0.9), Word(" with", 0.4, 0.6, 0.9),
             Word(" pg", 0.6, 0.8, 0.7), Word(" vector.", 0.8, 1.2, 0.5)]
    text, timed = respell_transcript("Store it with pg vector.", words, TERMS)
    assert text == "Store it with pgvector."
    assert [w.to_dict() for w in timed[3:]] == [{"word": " pgvector.", "start": 0.6, "end": 1.2,
                                                 "probability": 0.5}]
    assert timed[:3] == words[:3]


def test_the_sidecar_writes_a_streams_finals_with_its_terms_and_configure_replaces_them() -> None:
    policy = make([(1.0, 3.0), (4.0, 6.0)], prompt="Thandiwe.", terms=("Thandiwe",), interim=False)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    job = policy.take_job()
    assert job is not None and job.kind == "final"
    policy.on_result(job, Transcript(text="We met Tandiwe.", language="en"), now[0])
    events = feed_seconds(policy, 0.5, now)
    policy.finals.context.configure("Supabase.", terms=("Supabase",))
    events += feed_seconds(policy, 2.5, now)
    job = policy.take_job()
    assert job is not None and job.kind == "final"
    policy.on_result(job, Transcript(text="Tandiwe moved to Superbase.", language="en"), now[0])
    events += feed_seconds(policy, 0.5, now)
    assert [e["text"] for e in events if e["ev"] == "final"] == ["We met Thandiwe.", "Tandiwe moved to Supabase."]


def test_an_agent_streams_eager_final_is_written_as_its_final_is() -> None:
    policy = make([(1.0, 3.0)], silence_ms=500, prompt="Okonkwo.", terms=("Okonkwo",), eager=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    job = policy.take_job()
    assert job is not None
    events = policy.on_result(job, Transcript(text="Ask Akonkwo.", language="en"), now[0])
    events += feed_seconds(policy, 0.3, now)
    assert [(e["ev"], e["text"]) for e in events if "text" in e] == [("eager_final", "Ask Okonkwo."),
                                                                     ("final", "Ask Okonkwo.")]


def test_the_sidecar_takes_terms_from_open_and_configure_and_refuses_terms_that_are_not_strings() -> None:
    server, out = make_server()
    server._on_frame({"op": "open", "stream": "s1", "prompt": "Vercel.", "terms": ["Vercel"]}, b"", 0.0)
    assert server.streams["s1"].finals.context.terms == ("Vercel",)
    server._on_frame({"op": "configure", "stream": "s1", "prompt": "", "terms": []}, b"", 0.0)
    assert server.streams["s1"].finals.context.terms == ()
    server._on_frame({"op": "open", "stream": "s2", "terms": "Vercel"}, b"", 0.0)
    assert "s2" not in server.streams
    assert out.getvalue().endswith(b'{"ev":"error","stream":"s2","code":"bad_request","message":"terms must be '
                                   b'a list of strings"}\n')


def test_a_file_transcript_is_written_with_the_requests_terms() -> None:
    import numpy as np

    class Decoder:
        def decode(self, audio, **kw) -> Transcript:
            return Transcript(text="Deployed on Versel.", language="en")

    job = FileJob("r1", np.zeros(16000, dtype=np.float32), "en", False, 0.0, terms=("Vercel",))
    job.groups = [(0, 16000)]
    job.step(Decoder())  # type: ignore[arg-type]
    event = job.result_event()
    assert (event["text"], event["segments"][0]["text"]) == ("Deployed on Vercel.", "Deployed on Vercel.")
