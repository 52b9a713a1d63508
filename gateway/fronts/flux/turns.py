"""The dictation session's utterance events as Flux turns.

One utterance of the recognizer is one turn (``turn_index`` = the utterance's
index): ``speech_started`` is ``StartOfTurn``, ``partial`` ``Update``,
``eager_final`` ``EagerEndOfTurn``, ``turn_resumed`` ``TurnResumed``, and
``final`` ``EndOfTurn``; an utterance in which the recognizer found no words
(``discarded``) ends with an ``EndOfTurn`` with an empty transcript, so every
``StartOfTurn`` has its ``EndOfTurn``.

``end_of_turn_confidence`` is measured, never set: on an ``EndOfTurn`` the
pause ended, the end-of-turn model's probability where the server runs one
(``VOXGATE_ASR_TURN_MODEL``); otherwise the silence heard after the turn's
speech, in the audio the client has sent by the time the event goes out, over
``REFERENCE_SILENCE_MS`` and capped at 1. It is 0 on
``StartOfTurn``, ``Update`` and ``TurnResumed``: the recognizer hears speech
then (it sends no hypothesis during a pause).

``words``: the transcript's words. The recognizer measures no per-word
timing or probability on this path (Whisper's word timestamps would cost a
decode on its 30 s window per turn: end of speech to ``EndOfTurn`` went from
about 0.3 s to 0.6-1.2 s), so a word has no ``start``/``end``, and its
``confidence`` says whether the word is settled, not a probability: 1 for every
word of an ``EagerEndOfTurn``, ``TurnResumed`` and ``EndOfTurn`` (the turn's
final decode, which the ``EndOfTurn`` repeats unless ``TurnResumed`` comes) and
for the words of an ``Update`` the recognizer has committed (three hypotheses
agreed: they will be in the ``EndOfTurn``), 0 for an ``Update``'s words that
may still change.

``trigger`` of an ``EndOfTurn``: ``manual`` for the turn a ``ForceEndTurn`` (or
``CloseStream``) closed, ``timeout`` when ``eot_timeout_ms`` of silence ended
it with the confidence rule off (``eot_threshold=1.0``), ``model`` when the
silence rule of ``eot_threshold`` did. With the end-of-turn model on, ``model``
is the turn the model ended (its probability at least ``eot_threshold``) and
``timeout`` one the silence rule ended after the model found it unfinished.
What closed the turn is the audio's word (the sidecar marks a final the pause
closed), not the order messages came in: a ``ForceEndTurn`` that arrives while
the final of a turn the pause already ended is being decoded does not make that
turn ``manual``.

Pure bookkeeping, no I/O; used from one asyncio task at a time.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.fronts.flux.messages import TurnEvent
from gateway.fronts.flux.params import REFERENCE_SILENCE_MS
from gateway.protocol.dictation import (
    Discarded,
    EagerFinal,
    Final,
    Partial,
    SpeechStarted,
    TranscriptEvent,
    TurnResumed,
)


def silence_confidence(heard_s: float, speech_end_s: float) -> float:
    """The silence heard since ``speech_end_s``, as a fraction of the reference silence."""
    silence_ms = max(0.0, heard_s - speech_end_s) * 1000
    return min(1.0, silence_ms / REFERENCE_SILENCE_MS)


def settled_words(text: str) -> list[dict[str, Any]]:
    """The words of a turn's final decode."""
    return [{"word": word, "confidence": 1.0} for word in text.split()]


def hypothesis_words(text: str, stable: str) -> list[dict[str, Any]]:
    """A hypothesis' words: committed (1) or not yet (0); no timing is known."""
    committed = len(stable.split())
    return [{"word": word, "confidence": 1.0 if i < committed else 0.0} for i, word in enumerate(text.split())]


class TurnMapper:
    def __init__(self, *, manual_turns: bool, languages: bool, turn_threshold: float | None = None) -> None:
        self.manual_turns = manual_turns  # eot_threshold=1.0: a silence end is eot_timeout_ms'
        self.turn_threshold = turn_threshold  # the end-of-turn model's: a silence end is then a timeout
        self.languages = languages  # flux-general-multi: say the language found
        self._forcing: deque[str] = deque()  # ForceEndTurn marks not answered yet, oldest first
        self._answered: set[str] = set()
        self._closing = False
        self._newest = -1
        self._starts: dict[int, float] = {}  # turn -> where its speech started (s)
        self._eager: dict[int, EagerFinal] = {}  # the eager end of turn a client holds, per turn

    def force_end_turn(self, mark: str) -> None:
        self._forcing.append(mark)

    def close_stream(self) -> None:
        self._closing = True

    def map(self, event: TranscriptEvent, heard_s: float) -> list[TurnEvent]:
        """The turn events for one session event; ``heard_s``: the audio sent so far (seconds)."""
        if isinstance(event, SpeechStarted):
            self._newest = max(self._newest, event.utterance)
            self._starts[event.utterance] = event.at
            return [TurnEvent("StartOfTurn", event.utterance, event.at, event.at, "", [], 0.0)]
        if isinstance(event, Partial):
            return [TurnEvent("Update", event.utterance, self._start(event.utterance, event.start), event.end,
                              event.text, hypothesis_words(event.text, event.stable), 0.0)]
        if isinstance(event, EagerFinal):
            self._eager[event.utterance] = event
            return [TurnEvent("EagerEndOfTurn", event.utterance, self._start(event.utterance, event.start),
                              event.end, event.text, settled_words(event.text),
                              silence_confidence(heard_s, event.end), languages=self._language(event.language))]
        if isinstance(event, TurnResumed):
            held = self._eager.pop(event.utterance, None)
            text, words = (held.text, settled_words(held.text)) if held is not None else ("", [])
            return [TurnEvent("TurnResumed", event.utterance, self._start(event.utterance, event.at), event.at,
                              text, words, 0.0)]
        if isinstance(event, Final):
            return [self._end(event.utterance, event.start, event.end, event.text, settled_words(event.text),
                              heard_s, self._language(event.language), by_pause=event.endpoint,
                              model=event.turn_confidence)]
        if isinstance(event, Discarded):  # a request's close always gives a final: this one the pause (or a cut) ended
            end = event.end_sample / ASR_RATE
            return [self._end(event.utterance, self._start(event.utterance, end), end, "", [], heard_s, None,
                              by_pause=True)]
        if event.id in self._answered:  # Finalized: its ForceEndTurn was answered by the EndOfTurn before
            self._answered.discard(event.id)
        elif event.id in self._forcing:  # no turn was open: nothing to end
            self._forcing.remove(event.id)
        return []

    def _end(self, turn: int, start: float, end: float, text: str, words: list[dict[str, Any]], heard_s: float,
             languages: list[str] | None, *, by_pause: bool, model: float | None = None) -> TurnEvent:
        self._eager.pop(turn, None)
        start = self._starts.pop(turn, start)
        if self._forcing and turn >= self._newest and not by_pause:
            self._answered.add(self._forcing.popleft())
            trigger = "manual"
        elif self._closing and not by_pause:
            trigger = "manual"
        elif self.turn_threshold is not None:
            trigger = "model" if model is not None and model >= self.turn_threshold else "timeout"
        else:
            trigger = "timeout" if self.manual_turns else "model"
        confidence = model if model is not None and by_pause else silence_confidence(heard_s, end)
        return TurnEvent("EndOfTurn", turn, start, end, text, words, confidence, trigger=trigger, languages=languages)

    def _start(self, turn: int, fallback: float) -> float:
        return self._starts.get(turn, fallback)

    def _language(self, language: str) -> list[str] | None:
        return [language] if self.languages and language else None
