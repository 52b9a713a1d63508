"""A fake TTS engine whose streams time their words, as Piper's do: word ``k``
of the text (``str.split``) ends with frame ``k`` (80 ms each at 24 kHz), so a
played position maps to an exact, known word."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from engines.base import SynthesisOptions
from engines.timing import SpokenMark
from tests.gateway.fakes import FRAME, FakeStream, FakeTtsEngine


class TimedFakeStream(FakeStream):
    def __init__(self, engine: FakeTtsEngine, text: str, voice: str | None, options: SynthesisOptions | None):
        super().__init__(engine, text, voice, options)
        self.word_ends = [m.end() for m in re.finditer(r"\S+", text)]
        self.total = engine.frames_by_text.get(text, len(self.word_ends))
        self.marks: list[SpokenMark] = []
        self.word_exact = True

    async def frames(self) -> AsyncIterator[np.ndarray]:
        async for frame in super().frames():
            if self.produced <= len(self.word_ends):  # mark the word before its frame goes out
                self.marks.append(SpokenMark(self.word_ends[self.produced - 1], self.produced * FRAME))
            yield frame


@dataclass
class TimedFakeEngine(FakeTtsEngine):
    def open_stream(self, text: str, voice: str | None = None,
                    options: SynthesisOptions | None = None) -> TimedFakeStream:
        super().open_stream(text, voice, options)
        stream = TimedFakeStream(self, text, voice, options)
        self.streams[-1] = stream
        return stream
