"""The decoder's context: a stream's vocabulary and, with ``context_words``, its
earlier finals reach every decode job; ``configure`` replaces the vocabulary;
a decode that copies its prompt out is not taken."""

from __future__ import annotations

import pytest

from engines.asr.decoder import Transcript
from engines.asr.policy import PolicyTuning, StreamOptions, StreamPolicy
from engines.asr.prompt_text import repeats_prompt
from tests.engines.asr.scripted import ScriptedVad
from tests.engines.asr.test_policy import feed_seconds
from tests.engines.asr.test_server import make_server


def make(speech, tuning=None, **options) -> StreamPolicy:
    opts = StreamOptions(**options)
    return StreamPolicy("s", opts, vad=ScriptedVad(speech, opts.offset), tuning=tuning)


def final_of(policy: StreamPolicy, text: str, now: list[float], language: str = "en") -> str:
    """Answer the due final with ``text``; the prompt its job carried."""
    job = policy.take_job()
    assert job is not None and job.kind == "final"
    policy.on_result(job, Transcript(text=text, language=language), now[0])
    return job.prompt


def test_every_job_carries_the_vocabulary_and_configure_replaces_it():
    policy = make([(1.0, 3.0), (4.0, 6.0)], prompt="ComfyUI, Siobhan.")
    now = [0.0]
    feed_seconds(policy, 2.0, now)
    partial = policy.take_job()
    assert (partial.kind, partial.prompt) == ("partial", "ComfyUI, Siobhan.")
    policy.on_result(partial, Transcript(text="I installed", language="en"), now[0])
    feed_seconds(policy, 1.3, now)
    assert final_of(policy, "I installed ComfyUI.", now) == "ComfyUI, Siobhan."
    policy.finals.context.configure("Llanelli.")
    feed_seconds(policy, 3.3, now)
    # a dictation stream's decodes follow its earlier finals by default
    assert final_of(policy, "We drove through Llanelli.", now) == "Llanelli. I installed ComfyUI."


def test_an_agent_streams_decodes_carry_no_earlier_finals_by_default():
    policy = make([(1.0, 3.0), (4.0, 6.0)], prompt="Kennedy.", interim=False, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    assert final_of(policy, "And so, my fellow Americans,", now) == "Kennedy."
    feed_seconds(policy, 3.0, now)
    assert final_of(policy, "ask not", now) == "Kennedy."


def test_with_context_words_each_final_is_decoded_after_the_last_words_of_the_earlier_ones():
    policy = make([(1.0, 3.0), (4.0, 6.0), (7.0, 9.0), (10.0, 12.0)], tuning=PolicyTuning(context_words=5),
                  prompt="Kennedy.", interim=False)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    assert final_of(policy, "And so, my fellow Americans,", now) == "Kennedy."
    feed_seconds(policy, 3.0, now)
    assert final_of(policy, "ask not", now) == "Kennedy. And so, my fellow Americans,"
    feed_seconds(policy, 3.0, now)
    assert final_of(policy, "Qu'est-ce que", now, language="fr") == "Kennedy. my fellow Americans, ask not"
    policy.finals.context.configure("Kennedy.")
    feed_seconds(policy, 3.0, now)
    assert final_of(policy, "c'est", now, language="fr") == "Kennedy. Qu'est-ce que"  # the language changed


def test_the_gateway_can_reset_the_context():
    policy = make([(1.0, 3.0), (4.0, 6.0)], tuning=PolicyTuning(context_words=40), interim=False)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    final_of(policy, "One two three.", now)
    assert [e["text"] for e in feed_seconds(policy, 0.5, now) if e["ev"] == "final"] == ["One two three."]
    policy.finals.context.configure("", reset=True)
    feed_seconds(policy, 2.5, now)
    assert final_of(policy, "Four.", now) == ""


def test_the_sidecar_opens_a_stream_with_its_prompt_and_a_configure_op_replaces_it():
    server, _ = make_server()
    server._on_frame({"op": "open", "stream": "s1", "prompt": "ComfyUI."}, b"", 0.0)
    assert server.streams["s1"].finals.context.prompt == "ComfyUI."
    server._on_frame({"op": "configure", "stream": "s1", "prompt": "Siobhan."}, b"", 0.0)
    assert server.streams["s1"].finals.context.prompt == "Siobhan."


def test_a_prompt_that_is_not_text_is_an_error_for_the_stream():
    server, out = make_server()
    server._on_frame({"op": "open", "stream": "s1", "prompt": ["ComfyUI"]}, b"", 0.0)
    assert "s1" not in server.streams
    assert out.getvalue() == (b'{"ev":"error","stream":"s1","code":"bad_request","message":"prompt must be a '
                              b'string"}\n')


@pytest.mark.parametrize(("text", "prompt", "repeats"), [
    ("ComfyUI.", "ComfyUI, Siobhan.", False),  # a term said alone is a term heard
    ("ComfyUI, Siobhan, Llanelli, Zyxel.", "ComfyUI, Siobhan, Llanelli, Zyxel.", True),
    ("Ask what you can do for your country.",
     "And so my fellow Americans, ask not what your country can do for you.", False),
    ("what your country can do for you", "ask not what your country can do for you.", True),
    ("Thank you.", "Thank you.", False),  # under four words: too short to tell
    # a short term list recited in another order, its terms repeated
    ("Grigory, Machynlleth, Machynlleth, Machynlleth.", "Grigory, Grafana, Machynlleth.", True),
    ("High Llanelli, Anneliese, Thandiwe, Thandiwe.", "Llanelli, Anneliese, Thandiwe.", True),
    # the terms said in a sentence of other words
    ("Eilidh and Tadhg are coming for dinner tonight.", "Siobhan, Eilidh, Tadhg.", False),
    ("Grigory bought a Zyxel router for the office.", "Grigory, Zyxel, Xiomara.", False),
    # a final sharing only function words and a few others with the recent text
    ("And then it was over for all of them.", "It was over then, and all of them went home.", False),
    ("Siobhan, Eilidh, Tadhg.", "Siobhan, Eilidh, Tadhg.", False),  # three terms said: under four words
])
def test_a_decode_that_copies_its_prompt_is_told_from_one_that_shares_words(text, prompt, repeats):
    assert repeats_prompt(text, prompt) is repeats
