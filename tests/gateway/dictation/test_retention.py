"""What the gateway keeps for a sidecar restart, and the event filter across a replay."""

from __future__ import annotations

import numpy as np

from gateway.dictation.retention import IDLE_KEEP_SAMPLES, MAX_KEEP_SAMPLES, FinalizeEntry, Retention


def chunk(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), dtype=np.float32)


def test_idle_audio_is_kept_only_a_few_seconds_back():
    r = Retention()
    for _ in range(100):
        r.add_audio(chunk(0.1))
    assert r.resume_fields() == {"offset": 10 * 16000 - IDLE_KEEP_SAMPLES, "first_utterance": 0, "stable": ""}


def test_an_open_utterance_keeps_its_audio_until_its_final():
    r = Retention()
    for _ in range(20):
        r.add_audio(chunk(0.1))
    assert r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 4000})
    for _ in range(60):
        r.add_audio(chunk(0.1))
    assert r.accept({"ev": "partial", "utterance": 0, "stable": "hello"})
    r.trim()
    assert r.resume_fields() == {"offset": 3200, "first_utterance": 0, "stable": "hello"}
    assert r.accept({"ev": "final", "utterance": 0, "end_sample": 70000})
    assert r.resume_fields()["offset"] >= 70000 - 1600
    assert r.resume_fields()["first_utterance"] == 1


def test_replayed_events_are_not_shown_twice():
    r = Retention()
    assert r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    assert r.accept({"ev": "partial", "utterance": 0, "stable": "one two"})
    # a new process replays: the same utterance opens again, its stable must not shrink
    assert not r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    assert not r.accept({"ev": "partial", "utterance": 0, "stable": "one"})
    assert r.accept({"ev": "partial", "utterance": 0, "stable": "one two three"})
    assert r.accept({"ev": "final", "utterance": 0, "end_sample": 100})
    assert not r.accept({"ev": "final", "utterance": 0, "end_sample": 100})
    assert not r.accept({"ev": "partial", "utterance": 0, "stable": "one two three"})


def test_an_utterance_without_words_is_finished_and_reported_once():
    r = Retention()
    r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    assert r.accept({"ev": "discarded", "utterance": 0, "end_sample": 8000})
    assert not r.accept({"ev": "discarded", "utterance": 0, "end_sample": 8000})  # a replay's duplicate
    assert r.resume_fields()["first_utterance"] == 1


def test_a_finalize_mark_is_replayed_in_order_with_the_audio():
    r = Retention()
    r.add_audio(chunk(0.5))
    r.add_finalize()
    r.add_audio(chunk(0.5))
    entries = r.entries(0)
    assert [e if isinstance(e, FinalizeEntry) else len(e) for e in entries] == [8000, FinalizeEntry(None), 8000]
    assert len(r.entries(2)[0]) == 8000 and len(r) == 3


def test_a_finalize_mark_is_answered_once_across_a_replay():
    r = Retention()
    r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    r.add_audio(chunk(0.5))
    r.add_finalize("f1")
    r.add_audio(chunk(0.5))
    assert r.accept({"ev": "finalized", "id": "f1", "utterance": None})
    assert r.entries(1)[0] == FinalizeEntry("f1")  # the open utterance keeps it for a replay
    assert not r.accept({"ev": "finalized", "id": "f1", "utterance": None})  # the replayed finalize's answer


def test_an_unanswered_finalize_mark_is_kept_for_a_replay():
    r = Retention()
    r.add_finalize("f1")
    r.add_audio(chunk(5.0))  # past the idle window that would trim a plain finalize
    assert r.entries(0)[0] == FinalizeEntry("f1")
    r.accept({"ev": "finalized", "id": "f1", "utterance": None})
    r.add_audio(chunk(0.1))
    assert all(not isinstance(e, FinalizeEntry) for e in r.entries(0))


def test_an_utterance_that_never_ends_keeps_at_most_60_s():
    r = Retention()
    r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    for _ in range(900):
        r.add_audio(chunk(0.1))
    assert r.resume_fields()["offset"] == 90 * 16000 - MAX_KEEP_SAMPLES
    assert sum(len(e) for e in r.entries(0)) == MAX_KEEP_SAMPLES


def test_an_eager_final_is_shown_once_and_no_partial_follows_it():
    r = Retention()
    assert r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    assert r.accept({"ev": "eager_final", "utterance": 0, "text": "one two"})
    assert not r.accept({"ev": "eager_final", "utterance": 0, "text": "one two"})  # a replay repeats it
    assert not r.accept({"ev": "partial", "utterance": 0, "stable": "one"})
    assert r.withdrawn_eager({"ev": "final", "utterance": 0, "text": "one two", "end": 1.0}) is None
    assert r.accept({"ev": "final", "utterance": 0, "text": "one two", "end_sample": 16000})


def test_turn_resumed_passes_only_after_an_eager_final():
    r = Retention()
    r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    assert not r.accept({"ev": "turn_resumed", "utterance": 0, "at": 1.0})
    assert r.accept({"ev": "eager_final", "utterance": 0, "text": "one"})
    assert r.accept({"ev": "turn_resumed", "utterance": 0, "at": 1.2})
    assert not r.accept({"ev": "turn_resumed", "utterance": 0, "at": 1.2})
    assert r.accept({"ev": "partial", "utterance": 0, "stable": "one"})  # speech goes on
    assert r.accept({"ev": "eager_final", "utterance": 0, "text": "one"})  # the same words, held again


def test_a_final_that_differs_from_the_held_eager_final_is_preceded_by_turn_resumed():
    r = Retention()
    r.accept({"ev": "speech_started", "utterance": 0, "start_sample": 0})
    r.accept({"ev": "eager_final", "utterance": 0, "text": "one two"})
    final = {"ev": "final", "utterance": 0, "text": "one too", "end": 1.5, "end_sample": 24000}
    assert r.withdrawn_eager(final) == {"ev": "turn_resumed", "utterance": 0, "at": 1.5}
    eager = {"ev": "eager_final", "utterance": 0, "text": "one too", "end": 1.5}
    assert r.withdrawn_eager(eager) == {"ev": "turn_resumed", "utterance": 0, "at": 1.5}
    discarded = {"ev": "discarded", "utterance": 0, "end_sample": 24000}
    assert r.withdrawn_eager(discarded) == {"ev": "turn_resumed", "utterance": 0, "at": 1.5}
    assert r.accept(final)
    assert r.withdrawn_eager(final) is None  # finished: nothing held any more
