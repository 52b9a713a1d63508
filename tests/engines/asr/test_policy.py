"""The streaming policy with a scripted VAD: when utterances open and close,
which decodes it asks for, and which events come out."""

from __future__ import annotations

import numpy as np
import pytest

from engines.asr.agreement import keep_stable_words
from engines.asr.decoder import FULL_WINDOW_FRAMES, Transcript, Word, short_window_frames
from engines.asr.policy import PolicyTuning, StreamOptions, StreamPolicy
from engines.asr.vad import WINDOW
from tests.engines.asr.scripted import ScriptedVad

RATE = 16000
# the default tuning, in samples
PAD = 6400  # speech_pad_s 0.4
FINAL_TAIL = 512  # final_tail_s 0.032: one VAD window
FINAL_BEAM = PARTIAL_BEAM = 5
MARGIN_S = 12  # final_margin_s: a short-window final's encoder margin


def make(speech, dips=None, tuning=None, **options) -> StreamPolicy:
    opts = StreamOptions(**options)
    return StreamPolicy("s", opts, vad=ScriptedVad(speech, opts.offset, dips), tuning=tuning)


def feed_seconds(policy: StreamPolicy, seconds: float, now: list[float], chunk_s: float = 0.1) -> list[dict]:
    events = []
    for _ in range(round(seconds / chunk_s)):
        now[0] += chunk_s
        events += policy.feed(np.zeros(int(chunk_s * RATE), dtype=np.float32), now[0])
    return events


def result(text: str) -> Transcript:
    return Transcript(text=text, language="en")


def test_silence_never_opens_an_utterance_or_asks_for_a_decode():
    policy = make([])
    now = [0.0]
    assert feed_seconds(policy, 10, now) == []
    assert policy.waiting_since() is None
    assert policy.take_job() is None


def test_speech_opens_an_utterance_with_the_leading_pad():
    policy = make([(1.0, 3.0)])
    events = feed_seconds(policy, 1.2, [0.0])
    onset = 31 * WINDOW  # the first window whose centre lies in the speech span
    assert events == [{"ev": "speech_started", "stream": "s", "utterance": 0, "at": onset / RATE,
                       "start_sample": onset - PAD}]


def test_a_speculative_final_started_in_the_silence_becomes_the_final():
    policy = make([(1.0, 3.0)], silence_ms=500)
    now = [0.0]
    feed_seconds(policy, 3.3, now)  # 0.3 s of silence: the speculative final is due
    job = policy.take_job()
    assert (job.kind, job.utterance, job.beam_size) == ("final", 0, FINAL_BEAM)
    assert policy.on_result(job, result("hello world"), now[0]) == []  # not final until the silence lasts
    events = feed_seconds(policy, 0.3, now)
    finals = [e for e in events if e["ev"] == "final"]
    assert len(finals) == 1
    assert finals[0]["text"] == "hello world"
    assert (finals[0]["start"], finals[0]["end"]) == (0.992, 3.008)
    assert policy.take_job() is None  # no second decode for the same utterance


def test_the_speculative_final_starts_when_silence_begins_and_its_eager_final_waits_for_160_ms():
    policy = make([(1.0, 3.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.1, now)  # silent windows from 3.008 s: the speculative final is due at once
    job = policy.take_job()
    assert (job.kind, job.utterance, job.end_sample) == ("final", 0, 3008 * RATE // 1000 + FINAL_TAIL)
    assert policy.on_result(job, result("hello world"), now[0]) == []  # decoded, but the pause is short yet
    assert feed_seconds(policy, 0.1, now) == [  # the window ending at 3.2 s makes 192 ms of silence
        {"ev": "eager_final", "stream": "s", "utterance": 0, "text": "hello world", "start": 0.992,
         "end": 3.008, "language": "en"}]
    assert [(e["ev"], e["text"]) for e in feed_seconds(policy, 0.4, now)] == [("final", "hello world")]


@pytest.mark.parametrize("late_s", [0.0, 0.2, 0.6])
def test_a_final_decodes_the_same_samples_however_late_it_is_dispatched(late_s):
    # under load the final is taken later (or only after the close): the audio it
    # decodes must not grow with the wait, or the load would change its words
    speech = [(1.0, 2.0), (2.3, 3.0)]
    noise = np.random.default_rng(7).normal(0, 0.01, int(5 * RATE)).astype(np.float32)
    policy = make(speech, silence_ms=500)
    now, pos = 0.0, 0
    while pos < 3.1 * RATE + late_s * RATE:
        now += 0.02
        policy.feed(noise[pos:pos + 320], now)
        pos += 320
    policy.take_partial()  # whatever partials are due do not matter here
    job = policy.take_final()
    assert job is not None and job.kind == "final"
    silence_since = 3008 * RATE // 1000
    assert (job.start_sample, job.end_sample) == (31 * WINDOW - PAD, silence_since + FINAL_TAIL)
    np.testing.assert_array_equal(job.audio, noise[31 * WINDOW - PAD:silence_since + FINAL_TAIL])
    assert policy.final_window() is None  # nothing more to hand out


@pytest.mark.parametrize("full", [False, True])
def test_finals_carry_the_streams_encoder_window_and_partials_stay_short(full):
    policy = make([(1.0, 2.5)], silence_ms=500, full_window_finals=full)
    now = [0.0]
    feed_seconds(policy, 2.0, now)
    partial = policy.take_partial()
    assert partial is not None and not partial.full_window
    feed_seconds(policy, 0.9, now)  # 400 ms into the pause
    window = policy.final_window()
    final = policy.take_final()
    assert final is not None and final.kind == "final" and final.full_window is full
    assert window == (FULL_WINDOW_FRAMES if full else short_window_frames(len(final.audio), MARGIN_S))
    assert (final.margin_s, final.window().margin_s, final.window().full) == (MARGIN_S, MARGIN_S, full)


def test_a_full_window_stream_speculates_once_the_pause_lasts_160_ms_on_audio_up_to_that_mark():
    policy = make([(1.0, 2.0)], silence_ms=500, full_window_finals=True)
    now = [0.0]
    feed_seconds(policy, 2.1, now, chunk_s=0.02)
    policy.take_partial()
    assert (policy.due_early_final(), policy.due_final()) == (None, None)  # ~100 ms of pause
    feed_seconds(policy, 0.1, now, chunk_s=0.02)
    assert policy.due_early_final() is None and policy.due_final() is not None
    silence_since = policy.utterance.silence_since
    job = policy.take_final()
    assert job.full_window
    # its audio runs as far past the pause's start as the speculation had: 160 ms
    assert job.end_sample == silence_since + int(0.16 * RATE) == job.start_sample + len(job.audio)


def test_an_eager_full_window_stream_speculates_from_the_first_silent_window():
    policy = make([(1.0, 2.0)], silence_ms=500, full_window_finals=True, eager=True)
    now = [0.0]
    feed_seconds(policy, 2.1, now, chunk_s=0.02)  # ~100 ms of pause
    policy.take_partial()
    assert policy.due_early_final() is not None
    silence_since = policy.utterance.silence_since
    job = policy.take_final()
    assert job.full_window
    assert job.end_sample == silence_since + FINAL_TAIL == job.start_sample + len(job.audio)


def test_the_tuning_can_hold_an_eager_full_window_streams_speculation_until_the_turn_ends():
    policy = make([(1.0, 2.0)], silence_ms=500, full_window_finals=True, eager=True,
                  tuning=PolicyTuning(eager_full_window_speculates_early=False))
    now = [0.0]
    feed_seconds(policy, 2.1, now, chunk_s=0.02)
    policy.take_partial()
    assert (policy.due_early_final(), policy.due_final()) == (None, None)


def test_the_speculative_final_of_a_short_pause_is_early_work_until_the_pause_lasts_160_ms():
    policy = make([(1.0, 3.0)], silence_ms=500)
    now = [0.0]
    feed_seconds(policy, 3.1, now)
    due = policy.due_early_final()
    assert (due, policy.due_final(), policy.waiting_since()) == (pytest.approx(3.1), None, pytest.approx(3.1))
    feed_seconds(policy, 0.1, now)
    assert (policy.due_early_final(), policy.due_final()) == (None, due)


def test_a_pause_shorter_than_160_ms_wastes_the_speculative_decode_and_sends_nothing():
    policy = make([(1.0, 3.0), (3.15, 4.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.1, now)
    spec = policy.take_job()
    assert policy.on_result(spec, result("hello"), now[0]) == []
    events = feed_seconds(policy, 0.2, now)  # speech again after 128 ms of silence
    assert [e["ev"] for e in events] == []  # no eager_final went out, so no turn_resumed either
    feed_seconds(policy, 1.0, now)
    job = policy.take_job()
    assert (job.kind, job.utterance, job.generation) == ("final", 0, 1)


def test_speech_resuming_discards_the_speculative_result():
    policy = make([(1.0, 3.0), (3.35, 4.0)], silence_ms=500)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    spec = policy.take_job()
    feed_seconds(policy, 0.2, now)  # speech again
    assert policy.on_result(spec, result("hello"), now[0]) == []
    feed_seconds(policy, 1.0, now)  # 4.0 .. 4.5 silence; the new speculative final is due
    job = policy.take_job()
    assert job.kind == "final" and job.generation != spec.generation
    policy.on_result(job, result("hello world again"), now[0])
    events = feed_seconds(policy, 0.4, now)
    assert [e["text"] for e in events if e["ev"] == "final"] == ["hello world again"]


def test_an_utterance_without_words_is_discarded_not_finalized():
    policy = make([(1.0, 1.5)], silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 1.7, now)
    job = policy.take_job()
    events = policy.on_result(job, result(""), now[0]) + feed_seconds(policy, 0.5, now)
    assert [e["ev"] for e in events] == ["discarded"]


def test_finalize_gives_a_final_even_without_words():
    policy = make([(1.0, 5.0)], interim=False)
    now = [0.0]
    feed_seconds(policy, 2.0, now)
    policy.finalize(now[0])
    job = policy.take_job()
    assert job.kind == "final" and job.end_sample == 2 * RATE
    events = policy.on_result(job, result(""), now[0])
    assert [(e["ev"], e["text"]) for e in events] == [("final", "")]


def test_partials_commit_words_three_hypotheses_agree_on():
    policy = make([(0.5, 5.0)])
    now = [0.0]
    feed_seconds(policy, 1.1, now)
    first = policy.take_job()
    assert first.kind == "partial" and first.beam_size == PARTIAL_BEAM and first.prefix == ""
    long = "the quick brown fox jumps over the lazy dog and runs off into the woods"
    texts = tuple(" ".join(long.split()[:n]) for n in (11, 12, 13))
    events = policy.on_result(first, result(texts[0]), now[0])
    for text in texts[1:]:
        feed_seconds(policy, 0.5, now)
        events += policy.on_result(policy.take_job(), result(text), now[0])
    feed_seconds(policy, 0.5, now)
    fourth = policy.take_job()
    assert fourth.prefix == "the"  # the stable words are forced on the decoder
    assert [(e["text"], e["stable"]) for e in events] == [(texts[0], ""), (texts[1], ""), (texts[2], "the")]


def test_a_partial_that_comes_back_after_the_final_is_dropped():
    policy = make([(0.5, 1.5)], silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 1.1, now)
    partial = policy.take_job()
    feed_seconds(policy, 1.0, now)  # the utterance closes meanwhile
    final_job = policy.take_job()
    events = policy.on_result(final_job, result("hi"), now[0])
    events += policy.on_result(partial, result("hi there"), now[0])
    assert [e["ev"] for e in events] == ["final"]


def test_finals_are_asked_for_before_partials_of_the_next_utterance():
    policy = make([(0.5, 1.5), (1.9, 4.0)], silence_ms=300, interim=True)
    now = [0.0]
    feed_seconds(policy, 3.0, now)  # utterance 0 closed without a decode; utterance 1 wants a partial
    job = policy.take_job()
    assert (job.kind, job.utterance) == ("final", 0)
    assert policy.take_job().kind == "partial"


def test_a_long_utterance_is_cut_at_its_quietest_window():
    dip_window = int(20 * RATE) // WINDOW
    policy = make([(0.0, 40.0)], interim=False, dips={dip_window: 0.4})
    now = [0.0]
    events = feed_seconds(policy, 26.0, now, chunk_s=0.5)
    cut = dip_window * WINDOW + WINDOW // 2
    assert [e["ev"] for e in events] == ["speech_started", "speech_started"]
    assert events[1]["start_sample"] == cut
    job = policy.take_job()
    assert (job.kind, job.utterance, job.end_sample) == ("final", 0, cut)
    assert job.prefix == ""


@pytest.mark.parametrize("offset", [0, 5 * RATE])
def test_times_are_on_the_stream_clock_after_a_restart_offset(offset):
    policy = make([(offset / RATE + 1.0, offset / RATE + 2.0)], offset=offset, first_utterance=3,
                  stable="already said")
    now = [0.0]
    events = feed_seconds(policy, 1.5, now)
    assert events[0]["utterance"] == 3
    assert events[0]["at"] == pytest.approx(offset / RATE + 0.992)
    job = policy.take_job()
    assert job.prefix == "already said"


def test_a_final_is_decoded_freely_and_keeps_the_stable_words_in_front():
    policy = make([(0.5, 3.0)], silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 1.1, now)
    long = "the quick brown fox jumps over the lazy dog and runs off into the woods".split()
    for text in (" ".join(long[:12]), " ".join(long[:13]), " ".join(long[:13])):
        policy.on_result(policy.take_job(), result(text), now[0])
        feed_seconds(policy, 0.5, now)
    feed_seconds(policy, 1.3, now)  # the utterance closes: stable is "the quick"
    job = policy.take_job()
    assert (job.kind, job.prefix) == ("final", "")
    events = policy.on_result(job, result("a quick brown fox jumps over the lazy dog and runs off into the woods."),
                              now[0])
    assert [(e["text"], e["decoded"]) for e in events if e["ev"] == "final"] == [
        ("the quick brown fox jumps over the lazy dog and runs off into the woods.",
         "a quick brown fox jumps over the lazy dog and runs off into the woods.")]  # its own decode, beside it


def test_a_final_whose_decode_kept_the_stable_words_carries_no_second_text():
    policy = make([(0.5, 3.0)], silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 1.1, now)
    for text in ("the quick brown fox", "the quick brown fox jumps", "the quick brown fox jumps"):
        policy.on_result(policy.take_job(), result(text), now[0])
        feed_seconds(policy, 0.5, now)
    feed_seconds(policy, 1.3, now)
    events = policy.on_result(policy.take_job(), result("the quick brown fox jumps over."), now[0])
    finals = [e for e in events if e["ev"] == "final"]
    assert [(e["text"], "decoded" in e) for e in finals] == [("the quick brown fox jumps over.", False)]


def test_an_older_speculative_decode_finishing_after_the_close_does_not_answer_for_it():
    # two lanes: the speculative final of the first pause is still running when the
    # speaker resumes, pauses again and the utterance closes on the second one
    policy = make([(0.5, 2.0), (2.2, 3.0)], silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 2.1, now)
    stale = policy.take_job()
    assert (stale.kind, stale.generation) == ("final", 0)
    feed_seconds(policy, 1.0, now)  # speech again, then a new pause: a new speculative final
    current = policy.take_job()
    assert (current.kind, current.generation) == ("final", 1)
    assert feed_seconds(policy, 0.4, now) == []  # the silence closes the utterance while both run
    assert policy.on_result(stale, result("hello"), now[0]) == []
    events = policy.on_result(current, result("hello there friend"), now[0])
    assert [(e["ev"], e["text"]) for e in events] == [("final", "hello there friend")]


def test_keep_stable_words_keeps_the_timings_of_the_decoded_words():
    words = [Word("a", 0.0, 0.2, 0.5), Word("quick", 0.2, 0.5, 0.9), Word("fox", 0.5, 0.8, 0.9)]
    text, out = keep_stable_words("the quick", "a quick fox", words)
    assert text == "the quick fox"
    assert [(w.word, w.start, w.end) for w in out] == [("the", 0.0, 0.2), ("quick", 0.2, 0.5), ("fox", 0.5, 0.8)]
    assert keep_stable_words("", "Hello.", []) == ("Hello.", [])
    assert keep_stable_words("Hello,", "hello world", [])[0] == "Hello, world"


def test_keep_stable_words_goes_on_after_the_word_heard_where_the_stable_words_end():
    words = [Word(w, 0.1 * i, 0.1 * i + 0.1, 0.9) for i, w in enumerate("Rice is often served in round bowls.".split())]
    text, out = keep_stable_words("Rises often served in", "Rice is often served in round bowls.", words)
    assert text == "Rises often served in round bowls."
    assert [(w.word, round(w.start, 3), round(w.end, 3)) for w in out] == [
        ("Rises", 0.0, 0.125), ("often", 0.125, 0.25), ("served", 0.25, 0.375), ("in", 0.375, 0.5),
        ("round", 0.5, 0.6), ("bowls.", 0.6, 0.7)]
    # nothing to align on: the decode goes on after as many words as are stable
    assert keep_stable_words("one two", "three four five", [])[0] == "one two five"
    # a stable word heard again far later is not where the stable words end
    assert keep_stable_words("the", "a dog and the cat", [])[0] == "the dog and the cat"


def test_one_partial_per_stream_at_a_time_and_the_step_can_be_stretched():
    policy = make([(0.0, 9.0)])
    now = [0.0]
    feed_seconds(policy, 1.0, now)
    first = policy.take_partial()
    assert first is not None and first.end_sample == RATE
    feed_seconds(policy, 1.0, now)
    assert policy.due_partial() is None and policy.take_partial() is None  # the first is still running
    policy.on_result(first, result("one"), now[0])
    assert policy.due_partial() == pytest.approx(now[0] - 0.5)  # due once 0.5 s of new audio came in
    policy.partial_step = 2 * RATE
    policy.on_result(policy.take_partial(), result("one two"), now[0])
    feed_seconds(policy, 1.9, now)
    assert policy.due_partial() is None
    feed_seconds(policy, 0.1, now)
    assert policy.due_partial() == pytest.approx(now[0])


def test_no_partial_is_handed_out_while_the_speaker_pauses():
    policy = make([(0.0, 1.0), (1.3, 3.0)])
    now = [0.0]
    feed_seconds(policy, 1.0, now)
    assert policy.due_partial() is not None  # due, and still waiting for a decode lane
    feed_seconds(policy, 0.1, now)  # the pause: the speculative final soon covers this audio
    assert (policy.talking, policy.due_partial(), policy.take_partial()) == (False, None, None)
    feed_seconds(policy, 0.4, now)  # speech again from 1.3 s
    assert policy.due_partial() is not None
    job = policy.take_job()
    assert (job.kind, job.end_sample) == ("partial", int(1.5 * RATE))


def test_eager_sends_the_speculative_final_at_once_and_the_final_repeats_it():
    policy = make([(1.0, 3.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    job = policy.take_job()
    events = policy.on_result(job, result("hello world"), now[0])
    assert events == [{"ev": "eager_final", "stream": "s", "utterance": 0, "text": "hello world",
                       "start": 0.992, "end": 3.008, "language": "en"}]
    finals = [e for e in feed_seconds(policy, 0.3, now) if e["ev"] == "final"]
    assert [(f["utterance"], f["text"], f["end"]) for f in finals] == [(0, "hello world", 3.008)]


def test_speech_coming_back_after_an_eager_final_sends_turn_resumed_then_a_new_eager_final():
    policy = make([(1.0, 3.0), (3.4, 4.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    assert [e["ev"] for e in policy.on_result(policy.take_job(), result("hello"), now[0])] == ["eager_final"]
    events = feed_seconds(policy, 0.2, now)  # speech again from 3.4 s
    assert events == [{"ev": "turn_resumed", "stream": "s", "utterance": 0, "at": 3.392}]
    feed_seconds(policy, 0.9, now)  # 4.0 .. 4.5 silence
    job = policy.take_job()
    assert (job.kind, job.utterance) == ("final", 0)
    assert [(e["ev"], e["text"]) for e in policy.on_result(job, result("hello again"), now[0])] == \
        [("eager_final", "hello again")]
    assert [(e["ev"], e["text"]) for e in feed_seconds(policy, 0.4, now)] == [("final", "hello again")]


def test_speech_coming_back_before_the_speculative_result_sends_nothing():
    policy = make([(1.0, 3.0), (3.35, 4.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    spec = policy.take_job()
    assert feed_seconds(policy, 0.2, now) == []
    assert policy.on_result(spec, result("hello"), now[0]) == []


def test_an_eager_final_needs_words():
    policy = make([(1.0, 1.5)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 1.8, now)
    assert policy.on_result(policy.take_job(), result(""), now[0]) == []
    assert [e["ev"] for e in feed_seconds(policy, 0.4, now)] == ["discarded"]


def test_no_partial_is_sent_while_an_eager_final_stands():
    policy = make([(0.5, 2.0)], silence_ms=500, eager=True)
    now = [0.0]
    feed_seconds(policy, 1.9, now)
    partial = policy.take_job()
    assert partial.kind == "partial"
    feed_seconds(policy, 0.3, now)  # silence: the speculative final is due
    spec = policy.take_job()
    assert [e["ev"] for e in policy.on_result(spec, result("one two three"), now[0])] == ["eager_final"]
    assert policy.on_result(partial, result("one two"), now[0]) == []


def test_without_eager_the_speculative_result_stays_inside():
    policy = make([(1.0, 3.0), (3.4, 4.0)], silence_ms=500)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    assert policy.on_result(policy.take_job(), result("hello"), now[0]) == []
    assert feed_seconds(policy, 0.2, now) == []


def test_finalize_after_an_eager_final_gives_the_same_text():
    policy = make([(1.0, 3.0)], silence_ms=2000, eager=True, word_timestamps=True)
    now = [0.0]
    feed_seconds(policy, 3.3, now)
    words = [Word("hello", 1.0, 1.5, 0.9)]
    (eager,) = policy.on_result(policy.take_job(), Transcript("hello", "en", words), now[0])
    assert eager["words"] == [{"word": "hello", "start": 1.0, "end": 1.5, "probability": 0.9}]
    policy.finalize(now[0])
    (final,) = policy.settle()
    assert (final["ev"], final["text"], final["words"]) == ("final", "hello", eager["words"])


def test_a_finalize_mark_with_nothing_open_is_answered_at_once():
    policy = make([(5.0, 6.0)])
    now = [0.0]
    feed_seconds(policy, 1.0, now)
    policy.finalize(now[0], "f1")
    assert policy.settle() == [{"ev": "finalized", "stream": "s", "id": "f1", "utterance": None}]


def test_a_finalize_mark_follows_the_final_of_the_utterance_it_closed():
    policy = make([(1.0, 5.0)], interim=False)
    now = [0.0]
    feed_seconds(policy, 2.0, now)
    policy.finalize(now[0], "f1")
    assert policy.settle() == []
    job = policy.take_job()
    events = policy.on_result(job, result("hello world"), now[0])
    assert [(e["ev"], e.get("text"), e.get("id"), e["utterance"], e.get("endpoint")) for e in events] == [
        ("final", "hello world", None, 0, False), ("finalized", None, "f1", 0, None)]


def test_a_finalize_mark_waits_for_an_earlier_utterance_closed_by_silence():
    policy = make([(1.0, 1.5)], interim=False, silence_ms=300)
    now = [0.0]
    feed_seconds(policy, 2.0, now)  # the utterance closed by silence; its final is being decoded
    job = policy.take_job()
    policy.finalize(now[0], "f1")
    assert policy.settle() == []
    events = policy.on_result(job, result("hello"), now[0])
    assert [(e["ev"], e["utterance"], e.get("endpoint")) for e in events] == [
        ("final", 0, True), ("finalized", None, None)]  # the pause closed it, not the finalize


# ---- the tuning passed in (defaults above; each knob changes what the policy does)


def test_the_tuning_sets_the_pad_the_beams_and_the_encoder_margins():
    tuning = PolicyTuning(speech_pad_s=0.2, final_beam=3, partial_beam=1, short_window_margin_s=8, final_margin_s=9)
    policy = make([(1.0, 3.0)], silence_ms=500, tuning=tuning)
    now = [0.0]
    onset = 31 * WINDOW
    assert feed_seconds(policy, 1.6, now)[0]["start_sample"] == onset - 3200
    partial = policy.take_partial()
    assert (partial.beam_size, partial.margin_s, partial.start_sample) == (1, 8, onset - 3200)
    feed_seconds(policy, 1.7, now)  # into the pause: the speculative final is due
    window = policy.final_window()
    final = policy.take_final()
    assert (final.beam_size, final.margin_s, final.end_sample) == (3, 9, 3008 * RATE // 1000 + FINAL_TAIL)
    assert window == short_window_frames(len(final.audio), 9) == 1200  # 2.248 s of audio: 3 s + 9 s


def test_the_tuning_can_let_partials_go_on_while_the_speaker_pauses():
    policy = make([(0.0, 1.0), (1.3, 3.0)], tuning=PolicyTuning(partials_in_pauses=True))
    feed_seconds(policy, 1.1, [0.0])
    assert policy.talking is False
    job = policy.take_partial()  # the default hands none out in a pause (see above)
    assert (job.kind, job.end_sample) == ("partial", int(1.1 * RATE))


def test_the_tuning_sets_when_the_speculation_starts_and_how_far_its_audio_runs():
    policy = make([(1.0, 3.0)], silence_ms=500, tuning=PolicyTuning(speculate_from_s=0.1, final_tail_s=0.1))
    now = [0.0]
    feed_seconds(policy, 3.1, now, chunk_s=0.02)  # 92 ms of pause: the default would be due
    assert (policy.due_early_final(), policy.take_final()) == (None, None)
    feed_seconds(policy, 0.1, now, chunk_s=0.02)
    job = policy.take_final()
    assert job.end_sample == 3008 * RATE // 1000 + 1600


def test_the_tuning_sets_the_vad_thresholds_and_the_windows_that_open_an_utterance():
    assert feed_seconds(make([(1.0, 3.0)], tuning=PolicyTuning(speech_threshold=0.95)), 4.0, [0.0]) == []
    policy = make([(1.0, 3.0)], tuning=PolicyTuning(open_windows=10))
    now = [0.0]
    assert feed_seconds(policy, 1.2, now) == []  # three windows would have opened it
    assert [(e["ev"], e["at"]) for e in feed_seconds(policy, 0.2, now)] == [("speech_started", 0.992)]


def test_the_tuning_sets_the_longest_utterance():
    dip_window = int(8 * RATE) // WINDOW
    policy = make([(0.0, 40.0)], interim=False, dips={dip_window: 0.4},
                  tuning=PolicyTuning(max_utterance_s=10.0, min_cut_part_s=5.0))
    events = feed_seconds(policy, 10.5, [0.0], chunk_s=0.5)
    assert [e["ev"] for e in events] == ["speech_started", "speech_started"]
    assert events[1]["start_sample"] == dip_window * WINDOW + WINDOW // 2
    job = policy.take_job()
    finals = [e for e in policy.on_result(job, result("the first part"), 10.5) if e["ev"] == "final"]
    assert [(e["utterance"], e["endpoint"]) for e in finals] == [(0, False)]  # a length cut is no end of turn


@pytest.mark.parametrize(("after_s", "kept"), [(2.0, None), (0.5, "de")])
def test_a_language_detected_on_enough_audio_is_kept_for_the_utterance(after_s, kept):
    policy = make([(0.0, 9.0)], tuning=PolicyTuning(detect_language_after_s=after_s))
    now = [0.0]
    feed_seconds(policy, 1.0, now)
    policy.on_result(policy.take_partial(), Transcript(text="eins zwei", language="de"), now[0])
    feed_seconds(policy, 0.5, now)
    assert policy.take_partial().language == kept
