"""ItemTracker: the dictation session's events -> OpenAI's item events, with
and without server VAD, commits, clears and dropped utterances, exactly."""

from __future__ import annotations

import pytest

from gateway.fronts.openai_realtime.events import Events
from gateway.fronts.openai_realtime.items import ItemTracker
from gateway.protocol.dictation import Discarded, Final, Finalized, Partial, ServerEvent, SpeechStarted


def tracker(server_vad: bool) -> ItemTracker:
    events = Events()
    events.prefix = "t"
    return ItemTracker(events, server_vad)


def brief(events: list[dict]) -> list[tuple]:
    """(type, item, the field that matters) of each event, ids and usage aside."""
    out = []
    for e in events:
        kind = e["type"].rsplit(".", 1)[-1]
        value = {"speech_started": e.get("audio_start_ms"), "speech_stopped": e.get("audio_end_ms"),
                 "committed": e.get("previous_item_id"), "delta": e.get("delta"),
                 "completed": e.get("transcript")}[kind]
        out.append((kind, e["item_id"], value))
    return out


def started(n: int, at: float) -> SpeechStarted:
    return SpeechStarted(n, at)


def partial(n: int, stable: str, start: float = 0.5) -> Partial:
    return Partial(n, stable + " ...", stable, start, 1.0)


def final(n: int, text: str, start: float, end: float) -> Final:
    return Final(n, text, start, end, "en")


def feed(t: ItemTracker, *events: ServerEvent) -> list[dict]:
    return [out for event in events for out in t.on_event(event)]


def test_with_server_vad_each_utterance_is_an_item_with_append_only_deltas():
    t = tracker(server_vad=True)
    got = feed(t, started(0, 0.5), partial(0, ""), partial(0, "Hello"), partial(0, "Hello there,"),
               final(0, "Hello there, world.", 0.5, 1.75))
    assert brief(got) == [("speech_started", "item_t0001", 500), ("delta", "item_t0001", "Hello"),
                          ("delta", "item_t0001", " there,"), ("speech_stopped", "item_t0001", 1750),
                          ("committed", "item_t0001", None), ("delta", "item_t0001", " world."),
                          ("completed", "item_t0001", "Hello there, world.")]
    assert got[-1] == {"type": "conversation.item.input_audio_transcription.completed", "event_id": "event_t00007",
                       "item_id": "item_t0001", "content_index": 0, "transcript": "Hello there, world.",
                       "usage": {"type": "duration", "seconds": 1.25}}
    second = feed(t, started(1, 3.0), final(1, "Again.", 3.0, 3.5))
    assert brief(second) == [("speech_started", "item_t0002", 3000), ("speech_stopped", "item_t0002", 3500),
                             ("committed", "item_t0002", "item_t0001"), ("delta", "item_t0002", "Again."),
                             ("completed", "item_t0002", "Again.")]


def test_an_utterance_opening_before_the_last_final_is_its_own_item():
    t = tracker(server_vad=True)
    got = feed(t, started(0, 0.5), started(1, 2.0), final(0, "One.", 0.5, 1.5), partial(1, "Two"),
               final(1, "Two.", 2.0, 2.5))
    assert brief(got) == [("speech_started", "item_t0001", 500), ("speech_started", "item_t0002", 2000),
                          ("speech_stopped", "item_t0001", 1500), ("committed", "item_t0001", None),
                          ("delta", "item_t0001", "One."), ("completed", "item_t0001", "One."),
                          ("delta", "item_t0002", "Two"), ("speech_stopped", "item_t0002", 2500),
                          ("committed", "item_t0002", "item_t0001"), ("delta", "item_t0002", "."),
                          ("completed", "item_t0002", "Two.")]


def test_without_vad_one_item_gathers_utterances_until_the_commit():
    t = tracker(server_vad=False)
    got = feed(t, started(0, 0.5), partial(0, "Hello"), final(0, "Hello world.", 0.5, 1.5), started(1, 7.0),
               partial(1, "How are"))
    assert brief(got) == [("delta", "item_t0001", "Hello"), ("delta", "item_t0001", " world."),
                          ("delta", "item_t0001", " How are")]
    assert brief(t.commit("m1")) == [("committed", "item_t0001", None)]
    got = feed(t, final(1, "How are you?", 7.0, 8.0), Finalized("m1", 1))
    assert brief(got) == [("delta", "item_t0001", " you?"),
                          ("completed", "item_t0001", "Hello world. How are you?")]
    assert got[-1]["usage"] == {"type": "duration", "seconds": 7.5}


def test_without_vad_speech_after_the_commit_goes_to_the_next_item():
    t = tracker(server_vad=False)
    assert brief(feed(t, started(0, 0.5), final(0, "First.", 0.5, 1.0))) == [("delta", "item_t0001", "First.")]
    t.commit("m1")
    got = feed(t, started(1, 2.0), partial(1, "Second"), Finalized("m1", None))
    assert brief(got) == [("delta", "item_t0002", "Second"), ("completed", "item_t0001", "First.")]
    assert brief(t.commit("m2")) == [("committed", "item_t0002", "item_t0001")]


@pytest.mark.parametrize("server_vad", [False, True])
def test_a_commit_with_nothing_heard_or_open_completes_an_empty_item(server_vad):
    t = tracker(server_vad=server_vad)
    assert brief(t.commit("m1")) == [("committed", "item_t0001", None)]
    assert brief(feed(t, Finalized("m1", None))) == [
        ("completed", "item_t0001", "")]


def test_a_commit_under_vad_completes_the_open_utterance_like_vad_would():
    t = tracker(server_vad=True)
    feed(t, started(0, 0.5))
    assert t.commit("m1") == []
    got = feed(t, final(0, "Cut short", 0.5, 1.2), Finalized("m1", 0))
    assert brief(got) == [("speech_stopped", "item_t0001", 1200), ("committed", "item_t0001", None),
                          ("delta", "item_t0001", "Cut short"), ("completed", "item_t0001", "Cut short")]


def test_clear_drops_the_item_being_heard_and_the_next_one_is_normal():
    t = tracker(server_vad=True)
    assert brief(feed(t, started(0, 0.5), partial(0, "Forget"))) == [
        ("speech_started", "item_t0001", 500), ("delta", "item_t0001", "Forget")]
    t.clear()
    assert feed(t, partial(0, "Forget this"), final(0, "Forget this.", 0.5, 1.0),
                Finalized("m1", 0)) == []
    assert brief(feed(t, started(1, 2.0), final(1, "Keep.", 2.0, 2.5)))[-1] == ("completed", "item_t0002", "Keep.")


def test_clear_without_vad_drops_the_gathering_item():
    t = tracker(server_vad=False)
    feed(t, started(0, 0.5), final(0, "Gone.", 0.5, 1.0))
    t.clear()
    feed(t, started(1, 2.0), final(1, "Kept.", 2.0, 2.5))
    t.commit("m1")
    got = feed(t, Finalized("m1", None))
    assert brief(got) == [("completed", "item_t0002", "Kept.")]


def test_an_utterance_the_recognizer_drops_still_stops_and_completes_empty():
    t = tracker(server_vad=True)
    got = feed(t, started(0, 0.5), Discarded(0), started(1, 4.0))
    assert brief(got) == [("speech_started", "item_t0001", 500), ("speech_stopped", "item_t0001", 500),
                          ("committed", "item_t0001", None), ("completed", "item_t0001", ""),
                          ("speech_started", "item_t0002", 4000)]


def test_switching_vad_off_keeps_the_item_being_heard_open_until_the_commit():
    t = tracker(server_vad=True)
    feed(t, started(0, 0.5), partial(0, "Half"))
    t.set_server_vad(False)
    got = feed(t, final(0, "Half done.", 0.5, 1.0), started(1, 2.0), final(1, "More.", 2.0, 2.5))
    assert brief(got) == [("delta", "item_t0001", " done."), ("delta", "item_t0001", " More.")]
    assert brief(t.commit("m1")) == [("committed", "item_t0001", None)]
    assert brief(feed(t, Finalized("m1", 1))) == [
        ("completed", "item_t0001", "Half done. More.")]


def test_ready_closed_and_unknown_events_make_nothing():
    t = tracker(server_vad=True)
    assert feed(t, {"type": "ready"}, {"type": "closed", "utterances": 0, "audio_s": 0.0}, {"type": "lag"}) == []
