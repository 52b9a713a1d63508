"""Which decode runs next: finals strictly first, round-robin partials, files in
between, and a partial cadence that stretches with the load (fake streams)."""

from __future__ import annotations

from collections import deque

import pytest

from engines.asr.scheduler import Scheduler
from engines.asr.tuning import PolicyTuning

PARTIAL_SHARE = 0.6  # the default tuning's partial_share


class FakeStream:
    """Finals due at the given times (oldest first), at most one partial, and an early
    speculative final (a pause not yet 160 ms long) when no final is due."""

    def __init__(self, name: str, finals: tuple[float, ...] = (), partial: float | None = None,
                 talking: bool = False, early: float | None = None, window: int = 900,
                 eager: bool = False) -> None:
        self.name = name
        self.window = window
        self.finals = list(finals)
        self.partial = partial
        self.talking = talking
        self.early = early
        self.partial_step = 8000
        self.eager = eager
        self.taken: list[str] = []

    def due_final(self) -> float | None:
        return self.finals[0] if self.finals else None

    def due_early_final(self) -> float | None:
        return None if self.finals else self.early

    def due_partial(self) -> float | None:
        return self.partial

    def final_window(self) -> int | None:
        return self.window if self.finals or self.early is not None else None

    def take_final(self) -> str | None:
        if self.finals:
            self.finals.pop(0)
            return f"{self.name}:final"
        if self.early is not None:
            self.early = None
            return f"{self.name}:early"
        return None

    def take_partial(self) -> str | None:
        if self.partial is None:
            return None
        self.partial = None
        return f"{self.name}:partial"


class FakeFile:
    def __init__(self, since: float) -> None:
        self.since = since


def drain(scheduler: Scheduler, streams: dict, files: deque | None = None, now: float = 10.0) -> list:
    out = []
    while (work := scheduler.next_work(streams, files if files is not None else deque(), now)) is not None:
        out.append(work)
    return out


def test_a_final_goes_before_any_partial_however_long_the_partial_waited():
    streams = {"a": FakeStream("a", partial=0.0), "b": FakeStream("b", finals=(9.0,))}
    assert drain(Scheduler(), streams) == [["b:final"], ["a:partial"]]


def test_finals_go_oldest_first_and_a_batch_takes_several():
    streams = {"a": FakeStream("a", finals=(3.0, 5.0)), "b": FakeStream("b", finals=(4.0,)),
               "c": FakeStream("c", finals=(1.0,), partial=0.5)}
    assert drain(Scheduler(), streams) == [["c:final"], ["a:final"], ["b:final"], ["a:final"], ["c:partial"]]
    streams = {name: FakeStream(name, finals=(float(i),)) for i, name in enumerate("abcdef")}
    streams["a"].partial = 0.5
    assert drain(Scheduler(max_batch=3), streams) == [["a:final", "b:final", "c:final"], ["d:final", "e:final"],
                                                      ["f:final"], ["a:partial"]]


def test_a_stream_with_a_backlog_of_finals_gets_one_a_round_and_others_wait_for_one_of_them():
    # "burst" sent a minute of speech at once: five finals became due together, before "live"'s
    streams = {"burst": FakeStream("burst", finals=(1.0, 1.0, 1.0, 1.0, 1.0)), "live": FakeStream("live", finals=(2.0,))}
    scheduler = Scheduler()
    first = scheduler.next_work(streams, deque(), now=10.0)
    second = scheduler.next_work(streams, deque(), now=10.5)
    assert (first, second) == (["burst:final"], ["live:final"])
    # then the backlog goes on, and a new final of the live stream again waits for one of it at most
    streams["live"].finals.append(11.0)
    assert scheduler.next_work(streams, deque(), now=11.0) == ["burst:final"]
    assert scheduler.next_work(streams, deque(), now=11.5) == ["live:final"]
    assert drain(scheduler, streams, now=12.0) == [["burst:final"]] * 3


def test_a_batch_spreads_the_waiting_finals_over_two_rounds_of_the_lanes():
    scheduler = Scheduler(lanes=2, max_batch=4)
    assert [scheduler.final_batch(n) for n in (0, 1, 4, 5, 8, 9, 12, 13, 16, 40)] == [1, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    # eight streams stop talking together: small batches first, so half of them have a result after two calls
    streams = {str(i): FakeStream(str(i), finals=(float(i),)) for i in range(8)}
    assert [len(batch) for batch in drain(scheduler, streams)] == [2, 2, 1, 1, 1, 1]
    streams = {str(i): FakeStream(str(i), finals=(float(i),)) for i in range(16)}
    assert [len(batch) for batch in drain(scheduler, streams)] == [4, 3, 3, 2, 1, 1, 1, 1]
    assert Scheduler(lanes=2, max_batch=1).final_batch(40) == 1


def test_a_batch_holds_only_finals_of_the_oldest_finals_encoder_window():
    # a final must decode the same words whichever batch the load puts it in
    windows = {"a": 900, "b": 1100, "c": 900, "d": 1100, "e": 900, "f": 1000}
    streams = {name: FakeStream(name, finals=(float(i),), window=windows[name]) for i, name in enumerate("abcdef")}
    assert drain(Scheduler(lanes=1, max_batch=4), streams) == [["a:final", "c:final", "e:final"],
                                                               ["b:final", "d:final"], ["f:final"]]


def test_an_early_speculative_final_takes_only_a_lane_nothing_else_wants():
    streams = {"a": FakeStream("a", partial=5.0), "b": FakeStream("b", early=1.0), "c": FakeStream("c", early=2.0),
               "d": FakeStream("d", finals=(9.0,))}
    job = FakeFile(since=4.0)
    order = drain(Scheduler(lanes=1, max_batch=4), streams, deque([job]))
    assert order == [["d:final"], job, ["a:partial"], ["b:early"], ["c:early"]]
    streams = {name: FakeStream(name, early=float(i)) for i, name in enumerate("abcde")}
    assert drain(Scheduler(lanes=2, max_batch=4), streams) == [["a:early", "b:early"], ["c:early"], ["d:early"],
                                                               ["e:early"]]


def test_an_eager_streams_early_speculative_final_goes_before_partials_a_dictation_streams_after():
    streams = {"agent": FakeStream("agent", early=2.0, eager=True), "dict": FakeStream("dict", early=1.0),
               "talker": FakeStream("talker", partial=0.5, talking=True)}
    assert drain(Scheduler(), streams, now=3.0) == [["agent:early"], ["talker:partial"], ["dict:early"]]
    streams = {"agent": FakeStream("agent", early=2.0, eager=True),
               "talker": FakeStream("talker", partial=0.5, talking=True)}
    off = Scheduler(tuning=PolicyTuning(eager_speculation_first=False))
    assert drain(off, streams, now=3.0) == [["talker:partial"], ["agent:early"]]


def test_partials_go_round_robin_a_stream_just_served_waits_for_the_others():
    scheduler = Scheduler()
    streams = {"a": FakeStream("a", partial=1.0), "b": FakeStream("b", partial=2.0)}
    assert drain(scheduler, streams, now=3.0) == [["a:partial"], ["b:partial"]]
    # a's next partial became due before b's, but a was served last time first
    streams["a"].partial, streams["b"].partial = 3.1, 3.5
    assert drain(scheduler, streams, now=4.0) == [["a:partial"], ["b:partial"]]
    streams["a"].partial, streams["b"].partial = 4.1, 4.5
    scheduler.forget("a")  # a stream that ends loses its turn history
    assert scheduler.next_work(streams, deque(), 5.0) == ["a:partial"]


def test_a_batch_of_partials_takes_the_least_recently_served_streams():
    scheduler = Scheduler(max_batch=2, partial_batch=2)
    streams = {name: FakeStream(name, partial=1.0) for name in "abc"}
    assert scheduler.next_work(streams, deque(), 2.0) == ["a:partial", "b:partial"]
    streams["a"].partial = streams["b"].partial = 2.5
    assert scheduler.next_work(streams, deque(), 3.0) == ["c:partial", "a:partial"]


def test_a_file_window_runs_when_it_waited_longer_than_every_partial_but_never_before_a_final():
    job = FakeFile(since=1.0)
    files = deque([job])
    streams = {"a": FakeStream("a", partial=1.5), "b": FakeStream("b", finals=(8.0,))}
    order = drain(Scheduler(), streams, files)
    assert order == [["b:final"], job, ["a:partial"]]


def test_nothing_due_gives_nothing():
    assert Scheduler().next_work({"a": FakeStream("a")}, deque(), 0.0) is None


def test_the_partial_step_stretches_when_talking_streams_would_need_more_than_their_share():
    scheduler = Scheduler()
    scheduler.partial_cost_s = 0.05
    assert scheduler.partial_step_s(1) == 0.5
    assert scheduler.partial_step_s(12) == pytest.approx(12 * 0.05 / PARTIAL_SHARE)
    assert scheduler.partial_step_s(100) == PolicyTuning().max_partial_step_s == 1.5
    two_lanes = Scheduler(lanes=2)
    two_lanes.partial_cost_s = 0.05
    assert two_lanes.partial_step_s(24) == pytest.approx(24 * 0.05 / (2 * PARTIAL_SHARE))
    streams = {str(i): FakeStream(str(i), talking=True) for i in range(12)}
    streams["quiet"] = FakeStream("quiet")
    scheduler.next_work(streams, deque(), 0.0)
    assert {s.partial_step for s in streams.values()} == {int(12 * 0.05 / PARTIAL_SHARE * 16000)}


def test_the_partial_cost_follows_what_partials_took():
    scheduler = Scheduler()
    for _ in range(40):
        scheduler.observe_partial(0.3)
    assert scheduler.partial_cost_s == pytest.approx(0.3, abs=1e-3)


def test_the_cadence_and_the_batching_follow_the_tuning_passed_in():
    tuning = PolicyTuning(partial_step_s=0.25, max_partial_step_s=2.0, partial_share=0.5, final_rounds=1)
    scheduler = Scheduler(lanes=2, max_batch=4, tuning=tuning)
    scheduler.partial_cost_s = 0.05
    assert scheduler.partial_step_s(1) == 0.25
    assert scheduler.partial_step_s(12) == pytest.approx(12 * 0.05 / (2 * 0.5))
    assert scheduler.partial_step_s(100) == 2.0
    # one round of two lanes: 3 waiting finals make batches of 2 (two rounds would make 1)
    assert [scheduler.final_batch(n) for n in (1, 2, 3, 4, 8, 9)] == [1, 1, 2, 2, 4, 4]
