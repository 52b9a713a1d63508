"""Offline transcription of a whole file, in steps that share the decoder with live streams.

A file is not one long decode: the first step finds its speech with Silero VAD
and groups it into windows of at most ~28 s; each later step decodes one
window (the live finals' beam, 30 s Whisper window, word timings when asked). Between steps
the job goes back in the queue like any stream's work, so a ten-minute upload
delays live partials by one window's decode at a time, not by the whole file.

A ``FileJob`` is touched by one thread at a time: the decode worker runs
``step``, the sidecar's main thread does everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .decoder import WhisperDecoder, Word
from .framing import SAMPLE_RATE as RATE
from .term_spelling import respell_transcript
from .tuning import PolicyTuning

MAX_GROUP_S = 28.0
BEAM = PolicyTuning.final_beam  # the live finals' default search, so the two compare


def speech_groups(audio: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) sample ranges of at most MAX_GROUP_S that hold all the speech."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    spans = get_speech_timestamps(audio, VadOptions(max_speech_duration_s=MAX_GROUP_S - 1,
                                                    min_silence_duration_ms=500, speech_pad_ms=400))
    groups: list[tuple[int, int]] = []
    for span in spans:
        start, end = int(span["start"]), int(span["end"])
        if groups and end - groups[-1][0] <= MAX_GROUP_S * RATE:
            groups[-1] = (groups[-1][0], end)
        else:
            groups.append((start, end))
    return groups


@dataclass
class FileJob:
    req: str
    audio: np.ndarray
    language: str | None
    word_timestamps: bool
    since: float  # when this job last became ready for the decoder
    prompt: str = ""  # the request's vocabulary or prompt, the context of every window
    terms: tuple[str, ...] = ()  # the client's spelling of its terms (term_spelling.py)
    groups: list[tuple[int, int]] | None = None
    done: int = 0
    detected: str | None = None
    texts: list[str] = field(default_factory=list)
    segments: list[dict[str, Any]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.groups is not None and self.done >= len(self.groups)

    def step(self, decoder: WhisperDecoder) -> None:
        """One unit of work: find the speech, or decode the next window."""
        if self.groups is None:
            self.groups = speech_groups(self.audio)
            return
        start, end = self.groups[self.done]
        result = decoder.decode(self.audio[start:end], language=self.language or self.detected, beam_size=BEAM,
                                word_timestamps=self.word_timestamps, offset_s=start / RATE, prompt=self.prompt)
        self.detected = self.detected or result.language
        self.done += 1
        if result.text:
            text, words = respell_transcript(result.text, result.words, self.terms)
            self.texts.append(text)
            self.segments.append({"id": len(self.segments), "start": round(start / RATE, 3),
                                  "end": round(end / RATE, 3), "text": text})
            self.words.extend(words)

    def result_event(self) -> dict[str, Any]:
        return {"ev": "transcription", "req": self.req, "text": " ".join(self.texts),
                "language": self.language or self.detected or ("en" if not self.groups else ""),
                "duration": round(len(self.audio) / RATE, 3), "segments": self.segments,
                "words": [w.to_dict() for w in self.words]}
