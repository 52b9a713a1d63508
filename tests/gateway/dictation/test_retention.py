"""What the gateway keeps for a sidecar restart (the replay log), and the event
filter that holds the client's invariants across a replay."""

from __future__ import annotations

from typing import Any

import numpy as np

from gateway.dictation.event_filter import EventFilter
from gateway.dictation.retention import IDLE_KEEP_SAMPLES, MAX_KEEP_SAMPLES, FinalizeEntry, Retention
from gateway.dictation.stream import AsrStream
from gateway.protocol.dictation import Discarded, EagerFinal, Final, Finalized, Partial, SpeechStarted, TurnResumed


def chunk(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), dtype=np.float32)


def started(n: int, start_sample: int = 0) -> SpeechStarted:
    return SpeechStarted(n, round(start_sample / 16000, 3), start_sample)


def partial(n: int, stable: str) -> Partial:
    return Partial(n, f"{stable} ...", stable, 0.0, 1.0)


def final(n: int, end_sample: int, text: str = "words", end: float = 1.0) -> Final:
    return Final(n, text, 0.0, end, "en", end_sample=end_sample)


def eager(n: int, text: str, end: float = 1.0) -> EagerFinal:
    return EagerFinal(n, text, 0.0, end, "en")


class NoSidecar:
    """The stream is never live here: nothing is written."""

    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        raise AssertionError("nothing is written to a stream that is not live")

    def forget(self, stream: AsrStream) -> None:
        return None


def new_stream() -> AsrStream:
    return AsrStream(NoSidecar(), "s1", {})


def shown(stream: AsrStream) -> list[Any]:
    out = []
    while not stream.events.empty():
        out.append(stream.events.get_nowait())
    return out


def test_idle_audio_is_kept_only_a_few_seconds_back():
    r = Retention(EventFilter())
    for _ in range(100):
        r.add_audio(chunk(0.1))
    assert r.resume_fields() == {"offset": 10 * 16000 - IDLE_KEEP_SAMPLES, "first_utterance": 0, "stable": ""}


def test_an_open_utterance_keeps_its_audio_until_its_final():
    s = new_stream()
    for _ in range(20):
        s.retention.add_audio(chunk(0.1))
    s.deliver(started(0, 4000))
    for _ in range(60):
        s.retention.add_audio(chunk(0.1))
    s.deliver(partial(0, "hello"))
    s.retention.trim()
    assert s.retention.resume_fields() == {"offset": 3200, "first_utterance": 0, "stable": "hello"}
    s.deliver(final(0, 70000))
    assert s.retention.resume_fields()["offset"] >= 70000 - 1600
    assert s.retention.resume_fields()["first_utterance"] == 1
    assert [type(e) for e in shown(s)] == [SpeechStarted, Partial, Final]


def test_replayed_events_are_not_shown_twice():
    f = EventFilter()
    assert f.accept(started(0))
    assert f.accept(partial(0, "one two"))
    # a new process replays: the same utterance opens again, its stable must not shrink
    assert not f.accept(started(0))
    assert not f.accept(partial(0, "one"))
    assert f.accept(partial(0, "one two three"))
    assert f.accept(final(0, 100))
    assert not f.accept(final(0, 100))
    assert not f.accept(partial(0, "one two three"))


def test_an_utterance_without_words_is_finished_and_reported_once():
    f = EventFilter()
    f.accept(started(0))
    assert f.accept(Discarded(0, 8000))
    assert not f.accept(Discarded(0, 8000))  # a replay's duplicate
    assert f.resume_point() == (1, "")


def test_a_finalize_mark_is_replayed_in_order_with_the_audio():
    r = Retention(EventFilter())
    r.add_audio(chunk(0.5))
    r.add_finalize()
    r.add_audio(chunk(0.5))
    entries = r.entries(0)
    assert [e if isinstance(e, FinalizeEntry) else len(e) for e in entries] == [8000, FinalizeEntry(None), 8000]
    assert len(r.entries(2)[0]) == 8000 and len(r) == 3


def test_a_finalize_mark_is_answered_once_across_a_replay():
    s = new_stream()
    s.deliver(started(0))
    s.retention.add_audio(chunk(0.5))
    s.retention.add_finalize("f1")
    s.retention.add_audio(chunk(0.5))
    s.deliver(Finalized("f1", None))
    assert s.retention.entries(1)[0] == FinalizeEntry("f1")  # the open utterance keeps it for a replay
    s.deliver(Finalized("f1", None))  # the replayed finalize's answer
    assert shown(s) == [started(0), Finalized("f1", None)]


def test_an_unanswered_finalize_mark_is_kept_for_a_replay():
    s = new_stream()
    s.retention.add_finalize("f1")
    s.retention.add_audio(chunk(5.0))  # past the idle window that would trim a plain finalize
    assert s.retention.entries(0)[0] == FinalizeEntry("f1")
    s.deliver(Finalized("f1", None))
    s.retention.add_audio(chunk(0.1))
    assert all(not isinstance(e, FinalizeEntry) for e in s.retention.entries(0))


def test_an_utterance_that_never_ends_keeps_at_most_60_s():
    s = new_stream()
    s.deliver(started(0))
    for _ in range(900):
        s.retention.add_audio(chunk(0.1))
    assert s.retention.resume_fields()["offset"] == 90 * 16000 - MAX_KEEP_SAMPLES
    assert sum(len(e) for e in s.retention.entries(0)) == MAX_KEEP_SAMPLES


def test_an_eager_final_is_shown_once_and_no_partial_follows_it():
    f = EventFilter()
    assert f.accept(started(0))
    assert f.accept(eager(0, "one two"))
    assert not f.accept(eager(0, "one two"))  # a replay repeats it
    assert not f.accept(partial(0, "one"))
    assert f.withdrawn_eager(final(0, 16000, "one two")) is None
    assert f.accept(final(0, 16000, "one two"))


def test_turn_resumed_passes_only_after_an_eager_final():
    f = EventFilter()
    f.accept(started(0))
    assert not f.accept(TurnResumed(0, 1.0))
    assert f.accept(eager(0, "one"))
    assert f.accept(TurnResumed(0, 1.2))
    assert not f.accept(TurnResumed(0, 1.2))
    assert f.accept(partial(0, "one"))  # speech goes on
    assert f.accept(eager(0, "one"))  # the same words, held again


def test_a_final_that_differs_from_the_held_eager_final_is_preceded_by_turn_resumed():
    f = EventFilter()
    f.accept(started(0))
    f.accept(eager(0, "one two"))
    differing = final(0, 24000, "one too", end=1.5)
    assert f.withdrawn_eager(differing) == TurnResumed(0, 1.5)
    assert f.withdrawn_eager(eager(0, "one too", end=1.5)) == TurnResumed(0, 1.5)
    assert f.withdrawn_eager(Discarded(0, 24000)) == TurnResumed(0, 1.5)
    assert f.accept(differing)
    assert f.withdrawn_eager(differing) is None  # finished: nothing held any more


def test_the_stream_sends_the_withdrawal_before_the_differing_final():
    s = new_stream()
    s.deliver(started(0))
    s.deliver(eager(0, "one two"))
    s.deliver(final(0, 24000, "one too", end=1.5))
    assert [e.to_dict()["type"] for e in shown(s)] == ["speech_started", "eager_final", "turn_resumed", "final"]
