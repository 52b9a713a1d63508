"""The state a stream's policy keeps per utterance, and what it hands out.

``StreamOptions`` come from the gateway's ``open``; a ``DecodeJob`` is a
snapshot of audio to decode, handed to a decode lane and returned with its
result; ``OpenUtterance`` is the utterance being heard, ``ClosedUtterance``
one whose final is pending (finals.py); the open utterance's partials
(partials.py) and speculative final (speculation.py) are tracked apart. Plain data: the policy
(policy.py) owns every instance on the sidecar's main thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .agreement import Agreement
from .decoder import ShortWindow, Transcript

# VOXGATE_ASR_FINAL_WINDOW: short (every stream's finals on the short window, 12 s of silence after the
# utterance: as many word errors as offline decoding at less than half the 30 s window's cost), auto (30 s
# for streams without eager, short for eager ones), full
FINAL_WINDOWS = ("auto", "short", "full")
DEFAULT_FINAL_WINDOW = "short"


def full_window_finals(final_window: str, eager: bool) -> bool:
    """Whether a stream's finals decode on the 30 s window under the sidecar's
    ``final_window``: ``auto`` gives it to streams without ``eager``, whose final
    waits for the silence window anyway (the longer decode fits in it), and keeps
    eager streams on the short window, where the speculative final is the answer
    a voice agent is waiting for."""
    return final_window == "full" or (final_window == "auto" and not eager)


@dataclass(frozen=True)
class StreamOptions:
    language: str | None = None  # None: detect per utterance
    interim: bool = True
    word_timestamps: bool = False
    silence_ms: int = 500
    offset: int = 0  # absolute sample position of the first audio (after a restart: > 0)
    first_utterance: int = 0
    stable: str = ""  # committed words carried into the first utterance after a restart
    eager: bool = False  # send the speculative final as ``eager_final``
    full_window_finals: bool = False  # finals on Whisper's 30 s encoder window (partials stay short)
    prompt: str = ""  # the stream's vocabulary as decoder context (the gateway's ``configure`` replaces it)
    terms: tuple[str, ...] = ()  # the client's spelling of its terms (term_spelling.py)
    turn_threshold: float | None = None  # end a pause's turn early when the turn model says complete (turn_judge.py)


@dataclass
class DecodeJob:
    stream: str
    kind: str  # "partial" | "final"
    utterance: int
    audio: np.ndarray
    start_sample: int
    end_sample: int
    language: str | None
    prefix: str
    beam_size: int
    word_timestamps: bool
    generation: int
    audio_ready_at: float  # monotonic time the newest sample in ``audio`` arrived
    full_window: bool  # decode on Whisper's 30 s window rather than a short one
    margin_s: int  # silence after the audio on a short window (PolicyTuning: a partial's or a final's margin)
    prompt: str = ""  # decoder context: the stream's vocabulary when the job was handed out

    def window(self) -> ShortWindow:
        """What the decoder gets for this job (jobs with word timings take ``decode`` instead)."""
        return ShortWindow(self.audio, self.language, self.prefix, full=self.full_window, margin_s=self.margin_s,
                           prompt=self.prompt)


@dataclass
class OpenUtterance:
    index: int
    start: int  # first sample given to the decoder (speech onset minus the pad)
    speech_start: int
    agreement: Agreement
    language: str | None
    probs: list[tuple[int, float]] = field(default_factory=list)
    silence_since: int | None = None


@dataclass
class ClosedUtterance:
    index: int
    start: int
    speech_start: int
    end: int  # end of speech
    cut: int  # where the decoded audio ends (speech end plus the pad): the next utterance starts after it
    stable: str
    language: str | None
    forced: bool  # closed by finalize/end: a final even when empty
    endpointed: bool  # closed by the silence that ends a turn (not a request, not a length cut)
    since: float
    audio: np.ndarray | None  # None while waiting for the speculative decode
    awaits: int = -1  # the generation of the speculative decode that answers for it (audio None)
    result: Transcript | None = None
    dispatched: bool = False
    turn_confidence: float | None = None  # the turn model's answer in the pause that closed it
    heard: str = ""  # the utterance's newest partial hypothesis: which terms its final's context holds (context.py)
