"""A Piper synthesizer without a model, for tests of the engine's own logic.

``FakeSynth.phonemize`` splits the text at ". " (one sentence each) and makes
one phoneme id per character; ``infer`` gives ``samples_per_id`` samples per
id, every sample equal to ``sentence index + 1`` (so tests can tell sentences
apart in the output), and records the order of calls. ``gate`` (a
threading.Event per sentence index) makes a sentence wait until the test lets
it go.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np


class FakeSynth:
    def __init__(self, sample_rate: int = 22050, samples_per_id: int = 200, delay_s: float = 0.0,
                 fail_on: int | None = None) -> None:
        self.sample_rate = sample_rate
        self.speakers = {"alice": 0, "bob": 1}
        self.samples_per_id = samples_per_id
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.calls: list[int] = []  # sentence index of every infer, in call order
        self.speaker_ids: list[int | None] = []
        self.wide: list[bool] = []
        self.gates: dict[int, threading.Event] = {}
        self.started: dict[int, threading.Event] = {}
        self.running = 0
        self.max_running = 0
        self._lock = threading.Lock()

    def gate(self, index: int) -> threading.Event:
        self.started.setdefault(index, threading.Event())
        return self.gates.setdefault(index, threading.Event())

    def phonemize(self, text: str) -> list[list[int]]:
        sentences = [s for s in text.split(". ") if s.strip()]
        # the first id of a sentence encodes its index, the rest its length
        return [[1000 + i] + [1] * (len(s) - 1) for i, s in enumerate(sentences)]

    def infer(self, phoneme_ids: Sequence[int], speaker_id: int | None = None, wide: bool = False) -> np.ndarray:
        index = phoneme_ids[0] - 1000
        with self._lock:
            self.calls.append(index)
            self.speaker_ids.append(speaker_id)
            self.wide.append(wide)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if index in self.started:
                self.started[index].set()
            if index in self.gates:
                assert self.gates[index].wait(10), f"sentence {index} was never let go"
            if self.delay_s:
                time.sleep(self.delay_s)
            if self.fail_on == index:
                raise RuntimeError("the fake model failed")
            return np.full(len(phoneme_ids) * self.samples_per_id, index + 1, dtype=np.float32)
        finally:
            with self._lock:
                self.running -= 1


def expected_sentence(text: str, index: int, samples_per_id: int = 200) -> np.ndarray:
    """What ``FakeSynth`` makes of sentence ``index`` of ``text``."""
    sentence = [s for s in text.split(". ") if s.strip()][index]
    return np.full(len(sentence) * samples_per_id, index + 1, dtype=np.float32)
