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


def feed(policy: StreamPolicy, seconds: float, now: list[float], level: float = 0.0, chunk_s: float = 0.1) -> list[dict]:
    events = []
    for _ in range(round(seconds / chunk_s)):
        now[0] += chunk_s
        events += policy.feed(np.full(round(chunk_s * RATE), level, dtype=np.float32), now[0])
    return events


def stream(threshold: float | None = 0.5, speech=((1.0, 3.0),)) -> StreamPolicy:
    return StreamPolicy("s", StreamOptions(silence_ms=1000, turn_threshold=threshold), vad=ScriptedVad(list(speech)))


def speak(policy: StreamPolicy, level: float, now: list[float]) -> None:
    feed(policy, 1.0, now)
    feed(policy, 2.0, now, level)  # the scripted VAD hears speech from 1 s to 3 s


# the scripted speech ends with the window before 3.008 s; the utterance's audio starts 0.4 s
# before its first speech window (31)
SILENCE_FROM = 48128
UTTERANCE_START = 31 * 512 - 6400
QUESTION_AT = SILENCE_FROM + 1536  # 96 ms into the pause
EAGER_POINT = SILENCE_FROM + 2560  # 160 ms


def final_of(policy: StreamPolicy, text: str, now: float) -> dict:
    job = policy.take_job()
    assert job.kind == "final"
    final, = [e for e in policy.on_result(job, Transcript(text=text, language="en"), now) if e["ev"] == "final"]
    return final


def test_the_question_comes_96_ms_into_a_pause_and_a_confident_answer_ends_the_turn_at_the_eager_point():
    policy, model, now = stream(), LoudestSample(), [0.0]
    speak(policy, 0.8, now)
    feed(policy, 0.1, now, chunk_s=0.02)
    assert policy.turns.take() is None  # 92 ms of silence
    feed(policy, 0.02, now, chunk_s=0.02)
    question = policy.turns.take()
    assert (question.stream, question.utterance) == ("s", 0)
    assert len(question.audio) == QUESTION_AT - UTTERANCE_START
    assert policy.turns.take() is None  # asked once per pause
    assert policy.on_turn(question, model.complete(question.audio), now[0]) == []
    assert policy.utterance is not None  # 112 ms: a pause this short ends no turn, whatever the answer
    feed(policy, 0.04, now, chunk_s=0.02)
    assert policy.utterance is not None  # 152 ms
    feed(policy, 0.02, now, chunk_s=0.02)
    assert policy.utterance is None  # the window that reached 160 ms closed it
    final = final_of(policy, "done", now[0])
    assert (final["text"], final["endpoint"], final["turn_confidence"]) == ("done", True, 0.8)
    assert policy.pos < SILENCE_FROM + 1000 * 16  # long before the 1000 ms silence window


def test_an_answer_that_comes_after_the_eager_point_ends_the_turn_at_once():
    policy, model, now = stream(), LoudestSample(), [0.0]
    speak(policy, 0.8, now)
    feed(policy, 0.2, now)
    assert policy.utterance is not None  # 192 ms: no answer yet
    question = policy.turns.take()
    assert len(question.audio) == QUESTION_AT - UTTERANCE_START
    assert policy.on_turn(question, model.complete(question.audio), now[0]) == []
    assert policy.utterance is None
    assert final_of(policy, "done", now[0])["turn_confidence"] == 0.8


def test_a_pause_the_model_hears_as_unfinished_waits_for_the_silence_window():
    policy, model, now = stream(), LoudestSample(), [0.0]
    speak(policy, 0.3, now)
    feed(policy, 0.2, now)
    question = policy.turns.take()
    assert policy.on_turn(question, model.complete(question.audio), now[0]) == []
    assert policy.utterance is not None  # 0.3 < 0.5: the turn goes on
    feed(policy, 0.7, now)
    assert policy.utterance is not None
    feed(policy, 0.2, now)  # the 1000 ms silence window ends it
    final = final_of(policy, "not yet", now[0])
    assert (final["text"], final["endpoint"], final["turn_confidence"]) == ("not yet", True, 0.3)


def test_a_confident_answer_in_a_pause_shorter_than_the_eager_point_ends_nothing():
    policy, now = stream(speech=((1.0, 3.0), (3.15, 4.0))), [0.0]
    speak(policy, 0.9, now)
    feed(policy, 0.12, now, 0.9, chunk_s=0.02)
    question = policy.turns.take()
    assert policy.on_turn(question, 0.99, now[0]) == []
    feed(policy, 0.1, now, 0.9, chunk_s=0.02)  # speech again from 3.15 s, 142 ms into the pause
    assert policy.utterance is not None and policy.utterance.index == 0
    feed(policy, 0.8, now, 0.9)
    assert policy.utterance.index == 0  # the same turn, its pause inside


def test_an_answer_after_speech_came_back_is_stale_and_ends_nothing():
    policy, now = stream(speech=((1.0, 3.0), (3.3, 4.0))), [0.0]
    speak(policy, 0.9, now)
    feed(policy, 0.2, now, 0.9)
    question = policy.turns.take()
    assert question is not None
    feed(policy, 0.2, now, 0.9)  # speech again from 3.3 s
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
