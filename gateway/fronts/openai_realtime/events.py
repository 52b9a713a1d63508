"""OpenAI Realtime transcription events: the server events this front sends,
built from the gateway's own, and the client events it reads.

Shapes follow the official ``openai`` package's types
(``openai.types.realtime``): ``SessionCreatedEvent``,
``InputAudioBufferSpeechStartedEvent`` / ``...SpeechStoppedEvent`` /
``...CommittedEvent`` / ``...ClearedEvent``,
``ConversationItemInputAudioTranscriptionDeltaEvent`` / ``...CompletedEvent``,
``RealtimeErrorEvent``. Every server event carries a unique ``event_id``.

A client event is measured before it is parsed (``read_client_event``): at most
``MAX_EVENT_BYTES`` (64 KiB), except an ``input_audio_buffer.append``, which may
take ``MAX_APPEND_BYTES`` (a whole audio message in base64) when it is one flat
object; anything else past 64 KiB is ``TooLarge`` without being parsed.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadMessage, TooLarge
from gateway.protocol.dictation import MAX_AUDIO_MESSAGE_BYTES
from gateway.protocol.json import MAX_EVENT_BYTES, parse_message, structure_count, utf8_size

APPEND = "input_audio_buffer.append"
# each client event type and its fields besides ``type``; any other field is refused
CLIENT_FIELDS: dict[str, tuple[str, ...]] = {"session.update": ("event_id", "session"), APPEND: ("event_id", "audio"),
                                             "input_audio_buffer.commit": ("event_id",),
                                             "input_audio_buffer.clear": ("event_id",)}
CLIENT_TYPES = tuple(CLIENT_FIELDS)
MAX_EVENT_ID_CHARS = 128
# An append carries at most MAX_AUDIO_MESSAGE_BYTES of audio: 4/3 of it in base64, plus the JSON around it.
MAX_APPEND_BYTES = MAX_AUDIO_MESSAGE_BYTES * 4 // 3 + 4096
# An append is one flat object ("type", "event_id", "audio"); base64 has none of JSON's structural characters.
MAX_APPEND_STRUCTURE = 16


class ClientEventError(BadMessage):
    """A client event that cannot be taken, with the client's ``event_id`` (when it
    sent a usable one) for the ``error`` event that answers it, as OpenAI's does."""

    def __init__(self, message: str, event_id: str | None) -> None:
        super().__init__(message)
        self.event_id = event_id


@dataclass(frozen=True)
class ClientEvent:
    type: str
    data: dict[str, Any]
    event_id: str | None  # the client's own id, echoed in an error about this event


def parse_client_event(raw: str) -> ClientEvent:
    """One client event; ``BadMessage`` (naming the problem) when it is not a JSON
    object, ``ClientEventError`` when it has no usable type."""
    data = parse_message(raw)
    event_id = data.get("event_id")
    if not isinstance(event_id, str) or len(event_id) > MAX_EVENT_ID_CHARS:
        event_id = None
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ClientEventError("an event needs a string \"type\"", event_id)
    if kind not in CLIENT_TYPES:
        raise ClientEventError(f"event type {kind[:60]!r} is not supported by this transcription server; "
                         f"use one of: {', '.join(CLIENT_TYPES)}", event_id)
    unknown = sorted(set(data) - {"type", *CLIENT_FIELDS[kind]})
    if unknown:
        raise ClientEventError(f"{kind}.{unknown[0][:40]} is not a field of {kind}; it takes: "
                               f"{', '.join(CLIENT_FIELDS[kind])}", event_id)
    return ClientEvent(kind, data, event_id)


def read_client_event(text: str) -> ClientEvent:
    """``parse_client_event`` of a message measured first (the module docstring):
    ``TooLarge`` naming the limit, before any parsing, past it."""
    size = utf8_size(text)
    if size <= MAX_EVENT_BYTES:
        return parse_client_event(text)
    if size > MAX_APPEND_BYTES:
        raise TooLarge(f"event of {size} bytes; the limit is {MAX_APPEND_BYTES} "
                       f"({MAX_AUDIO_MESSAGE_BYTES} bytes of audio an append)")
    event = None
    if structure_count(text) <= MAX_APPEND_STRUCTURE:  # a few values to build: cheap to parse
        with contextlib.suppress(BadMessage):
            event = parse_client_event(text)
    if event is None or event.type != APPEND:
        raise TooLarge(f"event of {size} bytes; the limit is {MAX_EVENT_BYTES} for any event but a flat "
                       f"{APPEND} (up to {MAX_APPEND_BYTES})")
    return event


class Events:
    """Builds the server events of one socket, numbering their ``event_id``."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.prefix = secrets.token_hex(4)  # ids of this socket's events and items start with it

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "event_id": f"event_{self.prefix}{next(self._ids):05d}", **fields}

    def session_created(self, session: dict[str, Any]) -> dict[str, Any]:
        return self._event("session.created", session=session)

    def session_updated(self, session: dict[str, Any]) -> dict[str, Any]:
        return self._event("session.updated", session=session)

    def speech_started(self, item_id: str, audio_start_ms: int) -> dict[str, Any]:
        return self._event("input_audio_buffer.speech_started", audio_start_ms=audio_start_ms, item_id=item_id)

    def speech_stopped(self, item_id: str, audio_end_ms: int) -> dict[str, Any]:
        return self._event("input_audio_buffer.speech_stopped", audio_end_ms=audio_end_ms, item_id=item_id)

    def committed(self, item_id: str, previous_item_id: str | None) -> dict[str, Any]:
        return self._event("input_audio_buffer.committed", previous_item_id=previous_item_id, item_id=item_id)

    def cleared(self) -> dict[str, Any]:
        return self._event("input_audio_buffer.cleared")

    def delta(self, item_id: str, text: str) -> dict[str, Any]:
        return self._event("conversation.item.input_audio_transcription.delta", item_id=item_id, content_index=0,
                           delta=text)

    def completed(self, item_id: str, transcript: str, audio_s: float) -> dict[str, Any]:
        return self._event("conversation.item.input_audio_transcription.completed", item_id=item_id,
                           content_index=0, transcript=transcript,
                           usage={"type": "duration", "seconds": round(max(0.0, audio_s), 3)})

    def error(self, code: str, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              event_id: str | None = None) -> dict[str, Any]:
        """``kind``: ``invalid_request_error`` (the client can fix it) or ``server_error``."""
        return self._event("error", error={"type": kind, "code": code, "message": message, "param": param,
                                           "event_id": event_id})
