"""A clip through the real streaming policy with every decode run the moment it is due
(the cadence of one stream on an idle sidecar), and the same clip transcribed whole.

Shared by the streaming-accuracy tests and bench/asr_variants.py, so the two judge
the policy the same way.
"""

from __future__ import annotations

import numpy as np

from engines.asr.decoder import Transcript, WhisperDecoder
from engines.asr.files import FileJob
from engines.asr.policy import DecodeJob, PolicyTuning, StreamOptions, StreamPolicy

RATE = 16000
CHUNK = 1600  # 100 ms, as the benchmark's client sends


def decode_job(decoder: WhisperDecoder, job: DecodeJob) -> Transcript:
    """One job as a decode lane runs it (no word timings: the replays ask for none)."""
    if job.word_timestamps:
        raise ValueError("replayed streams ask for no word timings")
    return decoder.decode_batch([job.window()], beam_size=job.beam_size)[0]


def stream_finals(decode, audio: np.ndarray, options: StreamOptions | None = None,
                  events_out: list[dict] | None = None, tuning: PolicyTuning | None = None) -> list[str]:
    """The finals' texts of ``audio`` streamed through the policy (tuned by ``tuning``,
    default the sidecar's) in 100 ms chunks; ``decode(job) -> Transcript`` runs each
    decode; ``events_out`` gets every event the policy sends."""
    policy = StreamPolicy("s", options or StreamOptions(eager=True), tuning=tuning)
    finals: list[str] = []
    now = 0.0

    def settle(events: list[dict]) -> None:
        while True:
            finals.extend(e["text"] for e in events if e["ev"] == "final")
            if events_out is not None:
                events_out.extend(events)
            job = policy.take_job()
            if job is None:
                return
            events = policy.on_result(job, decode(job), now)

    for start in range(0, len(audio), CHUNK):
        now += CHUNK / RATE
        settle(policy.feed(audio[start:start + CHUNK], now))
    policy.end(now)
    settle(policy.settle())
    return finals


def offline_text(decoder: WhisperDecoder, audio: np.ndarray) -> str:
    """The whole clip through the file-transcription path (30 s windows)."""
    job = FileJob("replay", audio, None, False, 0.0)
    while not job.finished:
        job.step(decoder)
    return str(job.result_event()["text"])
