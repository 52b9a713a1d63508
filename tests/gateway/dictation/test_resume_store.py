"""The resume store's and the event log's bookkeeping, with a clock the test moves."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gateway.dictation.event_log import EventLog
from gateway.errors import GatewayError
from gateway.resume_tokens import MAX_SPENT, SPENT_KEEP_GRACES, ResumeStore


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def session(owner: str = "key") -> Any:
    return SimpleNamespace(owner=owner, token_hash=None, check_resume=lambda last_seq: None, release=lambda: None)


def refusal(store: ResumeStore, token: str, owner: str = "key") -> str:
    with pytest.raises(GatewayError) as info:
        store.claim(token, owner, 0)
    return info.value.code


def test_an_ended_session_is_collected_once_within_its_grace_then_expires_then_is_forgotten():
    clock = Clock()
    store = ResumeStore(grace_s=30, max_kept=4, clock=clock)
    first, second = session(), session()
    token_a, token_b = store.issue(first), store.issue(second)
    store.session_over(first)
    store.session_over(second)
    assert store.claim(token_a, "key", 0) == (first, None)
    assert refusal(store, token_a) == "resume_used"
    clock.now += 30.5
    assert refusal(store, token_b) == "resume_expired"
    clock.now += SPENT_KEEP_GRACES * 30
    assert refusal(store, token_b) == "resume_unknown"
    assert store.counts() == {"live": 0, "kept": 0, "spent": 0}


def test_ended_sessions_past_the_cap_are_forgotten_oldest_first():
    store = ResumeStore(grace_s=30, max_kept=2, clock=Clock())
    sessions = [session() for _ in range(3)]
    tokens = [store.issue(s) for s in sessions]
    for s in sessions:
        store.session_over(s)
    assert store.counts() == {"live": 0, "kept": 2, "spent": 1}
    assert refusal(store, tokens[0]) == "resume_expired"
    assert store.claim(tokens[2], "key", 0) == (sessions[2], None)


def test_a_resume_rotates_the_token_and_a_stranger_changes_nothing():
    store = ResumeStore(grace_s=30, max_kept=2, clock=Clock())
    live = session("pin")
    token = store.issue(live)
    assert refusal(store, token, owner="key") == "resume_forbidden"
    same, next_token = store.claim(token, "pin", 0)
    assert same is live and next_token not in (None, token)
    assert refusal(store, token, owner="pin") == "resume_used"
    assert store.claim(next_token, "pin", 0)[0] is live


def test_spent_tokens_are_remembered_up_to_their_cap():
    store = ResumeStore(grace_s=30, max_kept=2, clock=Clock())
    live = session()
    for _ in range(MAX_SPENT + 10):
        store.issue(live)
    assert store.counts() == {"live": 1, "kept": 0, "spent": MAX_SPENT}


def test_the_log_drops_old_sent_events_but_never_an_unsent_one():
    log = EventLog(max_events=3, max_bytes=1000)
    for seq in range(1, 6):
        assert log.add(seq, f"e{seq}", unsent_from=None)
    assert log.after(2, 5) == ["e3", "e4", "e5"]
    assert log.after(1, 5) is None  # event 2 is no longer kept
    assert log.add(6, "e6", unsent_from=5)  # drops 3: it was sent
    assert log.add(7, "e7", unsent_from=5)  # drops 4: it was sent
    assert not log.add(8, "e8", unsent_from=5)  # would drop 5, which no socket was given
    assert log.after(4, 7) == ["e5", "e6", "e7"]


def test_the_log_counts_bytes():
    log = EventLog(max_events=100, max_bytes=10)
    assert log.add(1, "x" * 6, unsent_from=None)
    assert log.add(2, "y" * 6, unsent_from=None)  # the first goes
    assert (len(log), log.bytes) == (1, 6)
    assert not log.add(3, "z" * 6, unsent_from=2)
    assert (len(log), log.bytes) == (1, 6)
