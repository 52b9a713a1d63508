"""File transcription in steps: speech grouping, and the job taking turns with streams."""

from __future__ import annotations

import io

import numpy as np
import pytest

from engines.asr.decoder import Transcript, Word
from engines.asr.files import MAX_GROUP_S, FileJob, speech_groups
from engines.asr.server import SidecarServer
from tests.support.speech import piper_say, resample, silence

RATE = 16000


class ScriptedDecoder:
    multilingual = False

    def __init__(self):
        self.calls = []
        self.prompts = []

    def languages(self):
        return ["en"]

    def decode(self, audio, *, language, beam_size=1, prefix="", word_timestamps=False, offset_s=0.0, prompt=""):
        self.calls.append((round(offset_s, 3), len(audio), language))
        self.prompts.append(prompt)
        text = f"window at {offset_s:g}" if offset_s < 20 else ""
        words = [Word("window", offset_s, offset_s + 0.5, 0.9)] if word_timestamps and text else []
        return Transcript(text=text, language="en", words=words)


def test_a_file_job_finds_speech_first_then_decodes_one_window_per_step():
    decoder = ScriptedDecoder()
    job = FileJob("r1", np.zeros(40 * RATE, dtype=np.float32), None, True, since=0.0,
                  groups=[(0, 5 * RATE), (10 * RATE, 15 * RATE), (30 * RATE, 32 * RATE)])
    steps = 0
    while not job.finished:
        job.step(decoder)
        steps += 1
    assert steps == 3
    assert decoder.calls == [(0.0, 5 * RATE, None), (10.0, 5 * RATE, "en"), (30.0, 2 * RATE, "en")]
    assert job.result_event() == {
        "ev": "transcription", "req": "r1", "text": "window at 0 window at 10", "language": "en", "duration": 40.0,
        "segments": [{"id": 0, "start": 0.0, "end": 5.0, "text": "window at 0"},
                     {"id": 1, "start": 10.0, "end": 15.0, "text": "window at 10"}],
        "words": [{"word": "window", "start": 0.0, "end": 0.5, "probability": 0.9},
                  {"word": "window", "start": 10.0, "end": 10.5, "probability": 0.9}]}


def test_every_window_of_a_file_is_decoded_with_the_requests_prompt():
    decoder = ScriptedDecoder()
    job = FileJob("r1", np.zeros(40 * RATE, dtype=np.float32), None, False, since=0.0, prompt="ComfyUI.",
                  groups=[(0, 5 * RATE), (10 * RATE, 15 * RATE)])
    while not job.finished:
        job.step(decoder)
    assert decoder.prompts == ["ComfyUI.", "ComfyUI."]


def test_between_file_steps_a_stream_that_waited_longer_goes_first():
    out = io.BytesIO()
    server = SidecarServer(ScriptedDecoder(), out, "tiny.en")
    job = FileJob("r1", np.zeros(RATE, dtype=np.float32), None, False, since=1.0,
                  groups=[(0, RATE // 2), (RATE // 2, RATE)])
    server.files.append(job)

    class WaitingStream:
        talking = True
        partial_step = 0
        eager = False
        since: float | None = 1.5

        def due_final(self):
            return None

        def due_partial(self):
            return self.since

        def take_partial(self):
            self.since = None
            return "stream-job"

    server.streams = {"s": WaitingStream()}
    server._dispatch(now=1.6)
    assert server.decode_lanes._work.get_nowait() is job  # the file came first (since 1.0)
    job.step(server.decoder)
    server._busy = 0
    server._on_file_step(job, job, now=2.0)  # back in line at 2.0
    server._dispatch(now=2.0)
    assert server.decode_lanes._work.get_nowait() == ["stream-job"]  # waited since 1.5
    server._busy = 0
    server._dispatch(now=2.1)
    assert server.decode_lanes._work.get_nowait() is job


@pytest.mark.slow
def test_speech_groups_cover_the_speech_in_windows_under_28_s():
    samples, rate = piper_say("The boy was there when the sun rose.")
    speech = resample(samples, rate)
    audio = np.concatenate([silence(2), speech, silence(12), speech, silence(12), speech, silence(1)])
    groups = speech_groups(audio)
    assert len(groups) == 2
    assert all(end - start <= MAX_GROUP_S * RATE for start, end in groups)
    starts = [2 * RATE, 2 * RATE + len(speech) + 12 * RATE, 2 * RATE + 2 * (len(speech) + 12 * RATE)]
    for start in starts:  # every sentence is inside a group
        assert any(a <= start + RATE // 2 and start + len(speech) - RATE // 2 <= b for a, b in groups)
    assert speech_groups(silence(5)) == []
