"""The turns of one ``/v2/speak`` socket, on the TTS session's utterances.

A turn is the text of the ``Speak`` messages up to a ``Flush`` (Flux keeps the
text exactly as sent: no whitespace added or dropped). The session cuts it
into sentence utterances, each a stripped slice of the turn's text, so an
utterance's ``start`` event places it in its turn's text.

Two sides, both in the order the session keeps:

- input (the socket's reader): ``speak`` opens a turn or extends the open one,
  ``flush`` closes it, ``interrupt`` takes every turn made so far out of play;
- output (the session's sender): a ``start`` or audio belongs to the oldest
  turn still in play, the session's ``flushed`` ends it. An ended turn is kept
  (at most ``MAX_ENDED``) until the next interrupt, since its audio may still be
  playing at the client when the user barges in.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gateway.fronts.deepgram.speak_v2_messages import new_speech_id

MAX_ENDED = 64


@dataclass(eq=False)
class Turn:
    speech_id: str = field(default_factory=new_speech_id)
    text: str = ""
    started: bool = False  # SpeechStarted sent
    audio_ms: float = 0.0
    utterances: dict[str, int] = field(default_factory=dict)  # utterance id -> where its text starts in ``text``
    _cursor: int = 0

    def place(self, utterance_id: str, utterance_text: str) -> None:
        """Record where utterance ``utterance_id`` sits in the turn's text."""
        at = self.text.find(utterance_text, self._cursor) if utterance_text else -1
        at = self._cursor if at < 0 else at
        self.utterances[utterance_id] = at
        self._cursor = at + len(utterance_text)

    def split(self, utterance_id: str | None, spoken_in_utterance: str) -> tuple[str, str]:
        """The turn's text heard and left, when utterance ``utterance_id`` was heard up to
        ``spoken_in_utterance`` (None or not this turn's: nothing of the turn was heard)."""
        at = self.utterances.get(utterance_id or "")
        cut = 0 if at is None else min(len(self.text), at + len(spoken_in_utterance))
        return self.text[:cut], self.text[cut:]


class Turns:
    def __init__(self) -> None:
        self.open: Turn | None = None  # receiving Speak
        self.in_play: deque[Turn] = deque()  # made and not ended, oldest first
        self.ended: deque[Turn] = deque(maxlen=MAX_ENDED)  # ended since the last interrupt
        self._interrupted: deque[list[Turn]] = deque()  # taken out of play, per interrupt not answered yet
        self.chars = 0  # every character of every Speak

    # ---- input side

    def speak(self, text: str) -> Turn:
        if self.open is None:
            self.open = Turn()
            self.in_play.append(self.open)
        self.open.text += text
        self.chars += len(text)
        return self.open

    def flush(self) -> Turn | None:
        """Close the open turn (None: there is none)."""
        turn, self.open = self.open, None
        return turn

    def any(self) -> bool:
        return bool(self.in_play or self.ended)

    def interrupt(self) -> None:
        """Every turn made so far leaves play; ``answer`` takes them when the session's answer comes."""
        self._interrupted.append(list(self.in_play))
        self.open = None

    # ---- output side

    def current(self) -> Turn | None:
        return self.in_play[0] if self.in_play else None

    def started(self, utterance_id: str, text: str) -> Turn | None:
        """A ``start`` event; the turn when its SpeechStarted is due."""
        turn = self.current()
        if turn is None:
            return None
        turn.place(utterance_id, text)
        if turn.started:
            return None
        turn.started = True
        return turn

    def end(self, speech_id: str) -> Turn | None:
        """The session's ``flushed`` for ``speech_id``: that turn ended."""
        turn = self.current()
        if turn is None or turn.speech_id != speech_id:
            return None
        self.in_play.popleft()
        self.ended.append(turn)
        return turn

    def answer(self, utterance_id: str | None) -> Turn | None:
        """The session answered the oldest interrupt: the turn holding ``utterance_id``
        (else the oldest one, which had not started playing); those turns leave
        play and the ended ones are forgotten."""
        taken = self._interrupted.popleft() if self._interrupted else []
        candidates = [*self.ended, *[t for t in taken if t in self.in_play]]
        for turn in taken:
            if turn in self.in_play:
                self.in_play.remove(turn)
        self.ended.clear()
        holding = [t for t in candidates if utterance_id is not None and utterance_id in t.utterances]
        if holding:
            return holding[0]
        return candidates[0] if candidates else None
