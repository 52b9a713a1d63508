"""A stream with a turn threshold asks the end-of-turn model once per pause, at
its eager point, and a confident answer ends the turn there; the model here is a
fake whose answer is the loudest sample it hears, so it tells utterances apart."""

from __future__ import annotations

import io
import queue

import numpy as np
import pytest

from engines.asr.decoder import Transcript
from engines.asr.framing import read_frame
from engines.asr.policy import StreamOptions, StreamPolicy
from engines.asr.server import SidecarServer
from engines.asr.turn_judge import TurnJudge, TurnQuestion
from tests.engines.asr.scripted import ScriptedVad

RATE = 16000


class LoudestSample:
    """A fake turn model: a turn is as finished as its loudest sample is loud."""

    def __init__(self):
        self.heard: list[int] = []

    def complete(self, audio: np.ndarray) -> float:
        self.heard.append(len(audio))
        return float(np.max(np.abs(audio)))


def feed(policy: StreamPolicy, seconds: float, now: list[float], level: float = 0.0) -> list[dict]:
    events = []
    for _ in range(round(seconds / 0.1)):
        now[0] += 0.1
        events += policy.feed(np.full(1600, level, dtype=np.float32), now[0])
    return events


def stream(threshold: float | None = 0.5) -> StreamPolicy:
    return StreamPolicy("s", StreamOptions(silence_ms=1000, turn_threshold=threshold), vad=ScriptedVad([(1.0, 3.0)]))


def speak(policy: StreamPolicy, level: float, now: list[float]) -> None:
    feed(policy, 1.0, now)
    feed(policy, 2.0, now, level)  # the scripted VAD hears speech from 1 s to 3 s


def test_a_pause_the_model_hears_as_finished_ends_the_turn_at_the_eager_point():
    policy, model, now = stream(), LoudestSample(), [0.0]
    speak(policy, 0.8, now)
    feed(policy, 0.1, now)
    assert policy.turns.take() is None  # 0.1 s of silence: not yet the eager point (160 ms)
    feed(policy, 0.1, now)
    question = policy.turns.take()
    assert (question.stream, question.utterance) == ("s", 0)
    # the utterance from its 0.4 s pad before the first speech window (31) to the window
    # where the silence (from 3.008 s) reached 160 ms
    assert len(question.audio) == (48128 + 2560) - (31 * 512 - 6400)
    assert policy.turns.take() is None  # asked once per pause
    events = policy.on_turn(question, model.complete(question.audio), now[0])
    assert events == []  # closed: its final decodes now
    assert policy.utterance is None
    job = policy.take_job()
    assert job.kind == "final" and job.end_sample <= 3.2 * RATE
    final, = [e for e in policy.on_result(job, Transcript(text="done", language="en"), now[0]) if e["ev"] == "final"]
    assert (final["text"], final["endpoint"], final["turn_confidence"]) == ("done", True, 0.8)


def test_a_pause_the_model_hears_as_unfinished_waits_for_the_silence_window():
    policy, model, now = stream(), LoudestSample(), [0.0]
    speak(policy, 0.3, now)
    feed(policy, 0.2, now)
    question = policy.turns.take()
    assert policy.on_turn(question, model.complete(question.audio), now[0]) == []
    assert policy.utterance is not None  # 0.3 < 0.5: the turn goes on
    events = feed(policy, 1.0, now)  # the 1000 ms silence window ends it
    job = policy.take_job()
    events += policy.on_result(job, Transcript(text="not yet", language="en"), now[0])
    final, = [e for e in events if e["ev"] == "final"]
    assert (final["text"], final["turn_confidence"]) == ("not yet", 0.3)


def test_an_answer_after_speech_came_back_is_stale_and_ends_nothing():
    policy = StreamPolicy("s", StreamOptions(silence_ms=1000, turn_threshold=0.5),
                          vad=ScriptedVad([(1.0, 3.0), (3.3, 4.0)]))
    now = [0.0]
    feed(policy, 1.0, now)
    feed(policy, 2.2, now, 0.9)
    question = policy.turns.take()
    assert question is not None
    feed(policy, 0.3, now, 0.9)  # speech again from 3.3 s
    assert policy.on_turn(question, 0.99, now[0]) == []
    assert policy.utterance is not None and policy.utterance.index == 0


def test_a_stream_without_a_threshold_never_asks():
    policy, now = stream(threshold=None), [0.0]
    speak(policy, 0.9, now)
    feed(policy, 0.5, now)
    assert policy.turns.take() is None


def test_no_answer_leaves_the_pause_to_the_silence_rule():
    policy, now = stream(), [0.0]
    speak(policy, 0.9, now)
    feed(policy, 0.2, now)
    assert policy.on_turn(policy.turns.take(), None, now[0]) == []
    assert policy.utterance is not None


def test_the_judge_answers_on_the_inbox_and_a_full_queue_answers_none_at_once():
    inbox: queue.Queue = queue.Queue()
    model = LoudestSample()
    judge = TurnJudge(model, inbox)
    question = TurnQuestion("s", 0, 0, np.full(100, 0.7, dtype=np.float32))
    for _ in range(33):  # one more than the queue holds, before the thread starts
        judge.ask(question)
    assert inbox.get_nowait() == ("turn", question, None)
    judge.start()
    answers = [inbox.get(timeout=30) for _ in range(32)]
    judge.stop()
    assert [a[2] for a in answers] == [pytest.approx(0.7)] * 32


class NoModel:
    multilingual = False

    def languages(self):
        return ["en"]


def test_the_sidecar_refuses_a_turn_threshold_without_a_model_and_out_of_range():
    out = io.BytesIO()
    server = SidecarServer(NoModel(), out, "tiny.en")
    server._on_frame({"op": "open", "stream": "a", "turn_threshold": 0.7}, b"", 0.0)
    with_model = SidecarServer(NoModel(), out, "tiny.en", turn_model=LoudestSample())
    with_model._on_frame({"op": "open", "stream": "b", "turn_threshold": 1.5}, b"", 0.0)
    with_model._on_frame({"op": "open", "stream": "c", "turn_threshold": 0.7}, b"", 0.0)
    out.seek(0)
    assert [read_frame(out)[0] for _ in range(2)] == [
        {"ev": "error", "stream": "a", "code": "bad_request",
         "message": "turn_threshold: this sidecar has no end-of-turn model"},
        {"ev": "error", "stream": "b", "code": "bad_request",
         "message": "turn_threshold: must be a number from 0 to 1, not 1.5"}]
    assert list(with_model.streams) == ["c"]
    assert with_model.streams["c"].options.turn_threshold == 0.7
