"""The watchdog's decisions on a clock the test moves: when it pings, what
counts as hung (a decode too old, or silence with pings unanswered) and what
does not (an idle sidecar that answers), and the settings it refuses."""

from __future__ import annotations

import pytest

from gateway.dictation.pipe import read_event
from gateway.dictation.watchdog import Watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watchdog(clock: Clock) -> Watchdog:
    return Watchdog(decode_timeout_s=30.0, silence_timeout_s=10.0, ping_after_s=2.0, tick_s=1.0, clock=clock)


def test_an_idle_sidecar_that_answers_its_pings_is_never_hung() -> None:
    clock = Clock()
    dog = watchdog(clock)
    asked = []
    while clock.now < 700.0:  # ten minutes with no work, a tick a second
        clock.now += 1.0
        assert dog.verdict() is None
        if dog.ping_due():
            asked.append(clock.now)
            clock.now += 0.5
            dog.heard(read_event({"ev": "pong"}))
    assert dog.pings == len(asked) == 240  # one every 2.5 s: 2 s of quiet, then the answer
    assert asked[:3] == [102.0, 104.5, 107.0]


def test_silence_with_pings_unanswered_is_a_hang_whether_or_not_there_is_work() -> None:
    clock = Clock()
    dog = watchdog(clock)
    pinged = []
    for _ in range(10):
        clock.now += 1.0
        assert dog.verdict() is None
        if dog.ping_due():
            pinged.append(clock.now - 100.0)
    assert pinged == [2.0, 4.0, 6.0, 8.0, 10.0]  # asked again every ping_after_s while it stays quiet
    clock.now += 0.5
    assert dog.verdict() == "the ASR sidecar sent nothing for 10 s and answered no ping"


def test_a_decode_older_than_its_limit_is_a_hang_although_the_sidecar_talks() -> None:
    clock = Clock()
    dog = watchdog(clock)
    for busy_s in range(1, 31):
        clock.now += 1.0
        dog.heard(read_event({"ev": "lag", "streams": {}, "busy_s": float(busy_s)}))
        dog.heard(read_event({"ev": "pong"}))
        assert dog.verdict() is None
        assert not dog.ping_due()
    clock.now += 1.0
    assert dog.verdict() == "a decode has run for 31 s"
    dog.heard(read_event({"ev": "lag", "streams": {}, "busy_s": 0.0}))  # it finished after all
    assert dog.verdict() is None


def test_a_new_process_starts_with_nothing_heard_nothing_busy_and_nothing_asked() -> None:
    clock = Clock()
    dog = watchdog(clock)
    dog.heard(read_event({"ev": "lag", "busy_s": 5.0}))
    clock.now += 40.0
    assert dog.verdict() == "a decode has run for 45 s"
    dog.reset()
    assert dog.verdict() is None
    assert not dog.ping_due()
    clock.now += 2.0
    assert dog.ping_due()


@pytest.mark.parametrize(("settings", "message"), [
    ({"silence_timeout_s": 5.0, "ping_after_s": 5.0},
     ("ping_after_s (5.0) must be above 0 and below silence_timeout_s (5.0), so a live sidecar is asked before it "
      "counts as hung")),
    ({"ping_after_s": 0.0},
     ("ping_after_s (0.0) must be above 0 and below silence_timeout_s (60.0), so a live sidecar is asked before "
      "it counts as hung")),
    ({"ping_after_s": 1.0, "tick_s": 2.0}, "tick_s (2.0) must be above 0 and at most ping_after_s (1.0)"),
    ({"tick_s": 0.0}, "tick_s (0.0) must be above 0 and at most ping_after_s (5.0)"),
])
def test_settings_that_could_not_tell_idle_from_hung_are_refused(settings: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        Watchdog(**settings)
    assert str(refused.value) == message
