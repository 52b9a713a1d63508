"""The work items of a TTS session's queue: an ``Utterance`` (one engine stream
and its counters), a ``FlushMark`` (answered with ``flushed`` once everything
before it was sent), ``EndOfWork`` (the client's ``end``) and ``DrainMark``
(the server stops: close 1001 once everything before it was sent)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engines.base import TtsStream
from gateway.protocol.tts import UtteranceEnd


@dataclass
class Utterance:
    id: str
    text: str
    voice: str | None
    seed: int | None
    options: dict[str, str] = field(default_factory=dict)  # SynthesisOptions.extra: language, instruct
    cancelled: bool = False
    stream: TtsStream | None = None
    started_at: float | None = None  # synthesis started
    first_sent_at: float | None = None  # first frame handed to the client
    synth_done_at: float | None = None
    samples_generated: int = 0  # at the engine's rate
    frames_sent: int = 0
    samples_sent: int = 0  # at the client's rate
    timeline_start: int | None = None  # where its first sample sits on the session's played timeline

    def end_event(self, native_rate: int, client_rate: int) -> UtteranceEnd:
        """The ``end`` event, built when it is sent (the counters are final then)."""
        ttfa = (self.first_sent_at - self.started_at) * 1000 if self.first_sent_at and self.started_at else None
        audio_native_s = self.samples_generated / native_rate
        rtf = (self.synth_done_at - self.started_at) / audio_native_s \
            if audio_native_s and self.synth_done_at and self.started_at else None
        return UtteranceEnd(self.id, self.frames_sent, self.samples_sent / client_rate, ttfa, rtf)


@dataclass(frozen=True)
class FlushMark:
    id: str


class EndOfWork:
    """Queued after the last utterance when the client sent ``end``."""


END_OF_WORK = EndOfWork()


class DrainMark:
    """Queued last when the server drains; the session closes 1001 after it."""


DRAIN_MARK = DrainMark()

QueueItem = Utterance | FlushMark | EndOfWork | DrainMark
