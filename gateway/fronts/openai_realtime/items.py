"""Conversation items of a transcription session: which utterances of the
dictation session make up which OpenAI item, and the events that tell the
client about them.

With server VAD each utterance is one item: ``speech_started`` when the
recognizer opens it, transcription ``delta`` events as its stable prefix grows,
then at its final ``speech_stopped``, ``committed``, the last ``delta`` and
``completed``. Without VAD (``turn_detection: null``) an item gathers every
utterance until the client commits; ``committed`` goes out at once and
``completed`` carries the finals of all its utterances, joined, once the
dictation session has answered the commit's finalize (``finalized``: every
final of the audio before it is out).

Deltas are append-only: each is the part of the item's text (its finals so far,
then the stable prefix of the utterance still open) not sent before, so the
deltas of an item add up to a prefix of its transcript, and at ``completed`` to
all of it. ``clear`` drops what was not committed: those items' events are
never sent. An utterance the recognizer drops (no words) completes its item
with an empty transcript, so every ``speech_started`` has its ``speech_stopped``.

Pure logic, no I/O: the transport feeds it the dictation session's events and
the client's commits and clears, and sends what it returns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from gateway.fronts.openai_realtime.events import Events
from gateway.protocol.dictation import Discarded, Final, Finalized, Partial, ServerEvent, SpeechStarted

Event = dict[str, Any]


@dataclass
class Item:
    id: str
    finals: dict[int, str] = field(default_factory=dict)  # utterance -> final text
    stable: dict[int, str] = field(default_factory=dict)  # utterance still open -> its stable prefix
    sent: str = ""  # the text already sent as deltas
    start_s: float | None = None
    end_s: float = 0.0
    committed: bool = False
    discarded: bool = False

    def text(self) -> str:
        """The finals, then the stable prefixes of utterances still open, in order."""
        parts = {**self.stable, **self.finals}
        return " ".join(t for _, t in sorted(parts.items()) if t)

    def transcript(self) -> str:
        return " ".join(t for _, t in sorted(self.finals.items()) if t)

    def audio_s(self) -> float:
        return max(0.0, self.end_s - self.start_s) if self.start_s is not None else 0.0


class ItemTracker:
    """Turns dictation events into OpenAI item events; see the module docstring."""

    def __init__(self, events: Events, server_vad: bool) -> None:
        self.events = events
        self.server_vad = server_vad
        self._ids = itertools.count(1)
        self._owner: dict[int, Item] = {}  # utterance -> its item, until the item completes
        self._open: Item | None = None  # without VAD: the item new utterances join
        self._previous: str | None = None  # the last committed item's id
        self._marks: dict[str, Item | None] = {}  # finalize marks -> the item they complete

    def _new_item(self) -> Item:
        return Item(id=f"item_{self.events.prefix}{next(self._ids):04d}")

    def _item_for(self, utterance: int) -> Item:
        item = self._owner.get(utterance)
        if item is None:
            if self.server_vad:
                item = self._new_item()
            else:
                if self._open is None:
                    self._open = self._new_item()
                item = self._open
            self._owner[utterance] = item
        return item

    def set_server_vad(self, on: bool) -> None:
        """Voice activity detection switched by ``session.update``: without it the
        item being heard keeps gathering until the client commits."""
        if on == self.server_vad:
            return
        self.server_vad = on
        if not on:
            hearing = [i for i in self._owner.values() if not i.committed and not i.discarded]
            self._open = hearing[-1] if hearing else None
        else:
            self._open = None

    # ---- the dictation session's events

    def on_event(self, event: ServerEvent) -> list[Event]:
        if isinstance(event, SpeechStarted):
            return self._speech_started(event.utterance, event.at)
        if isinstance(event, Partial):
            return self._partial(event.utterance, event.stable, event.start)
        if isinstance(event, Final):
            return self._final(event.utterance, event.text, event.start, event.end)
        if isinstance(event, Discarded):
            return self._dropped(event.utterance)
        if isinstance(event, Finalized):
            item = self._marks.pop(event.id, None)
            return self._complete(item) if item is not None and not item.discarded else []
        return []

    def _speech_started(self, utterance: int, at: float) -> list[Event]:
        fresh = utterance not in self._owner
        item = self._item_for(utterance)
        if item.start_s is None:
            item.start_s = at
        if not self.server_vad or not fresh or item.discarded:
            return []
        return [self.events.speech_started(item.id, round(at * 1000))]

    def _partial(self, utterance: int, stable: str, start: float) -> list[Event]:
        item = self._item_for(utterance)
        if item.start_s is None:
            item.start_s = start
        item.stable[utterance] = stable
        return self._deltas(item)

    def _final(self, utterance: int, text: str, start: float, end: float) -> list[Event]:
        item = self._item_for(utterance)
        item.stable.pop(utterance, None)
        item.finals[utterance] = text
        if item.start_s is None:
            item.start_s = start
        item.end_s = max(item.end_s, end)
        return self._utterance_done(item, utterance, end)

    def _dropped(self, utterance: int) -> list[Event]:
        """The recognizer found no words in the utterance."""
        item = self._owner.get(utterance)
        if item is None:
            return []
        item.stable.pop(utterance, None)
        return self._utterance_done(item, utterance, item.end_s if item.end_s else (item.start_s or 0.0))

    def _utterance_done(self, item: Item, utterance: int, end: float) -> list[Event]:
        if item.discarded:
            self._owner.pop(utterance, None)
            return []
        if not self.server_vad or (item.committed and item in self._marks.values()):
            return self._deltas(item)  # it completes at the client's commit
        out = [self.events.speech_stopped(item.id, round(end * 1000)), self._commit(item)]
        return out + self._complete(item)

    # ---- the client's commit and clear

    def commit(self, mark: str) -> list[Event]:
        """The client committed the buffer; the dictation session gets a finalize
        with ``mark``. Without VAD the gathering item is committed now; with VAD
        the utterance the finalize closes completes as if VAD had closed it, or,
        when none was open, an empty item is committed."""
        if self.server_vad:
            if any(not i.committed and not i.discarded for i in self._owner.values()):
                return []
            item = self._new_item()
        else:
            item = self._open or self._new_item()
            self._open = None
        self._marks[mark] = item
        return [self._commit(item)]

    def clear(self) -> None:
        """Forget everything not committed: the items still being heard."""
        for item in self._owner.values():
            if not item.committed:
                item.discarded = True
        if self._open is not None:
            self._open.discarded = True
        self._open = None

    # ---- building the events

    def _commit(self, item: Item) -> Event:
        item.committed = True
        event = self.events.committed(item.id, self._previous)
        self._previous = item.id
        return event

    def _deltas(self, item: Item) -> list[Event]:
        if item.discarded:
            return []
        text = item.text()
        if len(text) <= len(item.sent) or not text.startswith(item.sent):
            return []
        delta, item.sent = text[len(item.sent):], text
        return [self.events.delta(item.id, delta)]

    def _complete(self, item: Item) -> list[Event]:
        transcript = item.transcript()
        out = []
        if transcript.startswith(item.sent) and len(transcript) > len(item.sent):
            out.append(self.events.delta(item.id, transcript[len(item.sent):]))
            item.sent = transcript
        out.append(self.events.completed(item.id, transcript, item.audio_s()))
        for utterance in [u for u, owner in self._owner.items() if owner is item]:
            del self._owner[utterance]
        return out
