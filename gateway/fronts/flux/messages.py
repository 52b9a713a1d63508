"""Flux's wire messages: what ``/v2/listen`` sends, shaped as the official
SDK's types define them (deepgram-sdk 7: ``ListenV2Connected``,
``ListenV2TurnInfo``, ``ListenV2ConfigureSuccess``,
``ListenV2ConfigureFailure``, ``ListenV2Warning``, ``ListenV2FatalError``), and
the client messages it takes (``Configure``, ``ForceEndTurn``,
``CloseStream``).

Exchange grammar (one socket)::

    server: Connected
    client: (binary audio | Configure | ForceEndTurn)* CloseStream?
    server: per turn n: TurnInfo StartOfTurn, (Update | EagerEndOfTurn TurnResumed)*,
            EagerEndOfTurn?, EndOfTurn (turn_index n in each)
            ConfigureSuccess | ConfigureFailure for each Configure, in order
            Warning* (the stream goes on), Error then the close (it ends)

Every server message carries ``sequence_id``: 0 for ``Connected``, then one more
for each message the socket sends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.protocol.json import message_type, parse_message, refuse_unknown_fields, unknown_type

CLIENT_TYPES = ("Configure", "ForceEndTurn", "CloseStream")


@dataclass(frozen=True)
class TurnEvent:
    """One ``TurnInfo``, less what the socket adds (``request_id``, ``sequence_id``)."""

    event: str  # StartOfTurn | Update | EagerEndOfTurn | TurnResumed | EndOfTurn
    turn_index: int
    audio_window_start: float
    audio_window_end: float
    transcript: str
    words: list[dict[str, Any]]
    end_of_turn_confidence: float
    trigger: str | None = None  # EndOfTurn only: model | manual | timeout
    languages: list[str] | None = None  # flux-general-multi, where the language is known

    def to_dict(self, request_id: str, sequence_id: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "TurnInfo", "request_id": request_id, "sequence_id": sequence_id, "event": self.event,
            "turn_index": self.turn_index, "audio_window_start": round(self.audio_window_start, 3),
            "audio_window_end": round(self.audio_window_end, 3), "transcript": self.transcript,
            "words": self.words, "end_of_turn_confidence": round(self.end_of_turn_confidence, 3)}
        if self.trigger is not None:
            out["trigger"] = self.trigger
        if self.languages is not None:
            out["languages"] = self.languages
        return out


def connected(request_id: str, sequence_id: int) -> dict[str, Any]:
    return {"type": "Connected", "request_id": request_id, "sequence_id": sequence_id}


def configure_success(request_id: str, sequence_id: int, thresholds: dict[str, float | int],
                      keyterms: list[str]) -> dict[str, Any]:
    """The stream's configuration after a ``Configure``: the thresholds and key terms in
    force (never language hints or numerals here)."""
    return {"type": "ConfigureSuccess", "request_id": request_id, "thresholds": thresholds, "keyterms": keyterms,
            "numerals": False, "sequence_id": sequence_id}


def configure_failure(request_id: str, sequence_id: int, code: str, description: str) -> dict[str, Any]:
    return {"type": "ConfigureFailure", "request_id": request_id, "sequence_id": sequence_id, "code": code,
            "description": description}


def warning(request_id: str, sequence_id: int, code: str, description: str) -> dict[str, Any]:
    """A problem the stream goes on after: ``code`` is the gateway's machine code, upper-cased."""
    return {"type": "Warning", "request_id": request_id, "sequence_id": sequence_id, "code": code.upper(),
            "description": description}


def fatal_error(sequence_id: int, code: str, description: str) -> dict[str, Any]:
    """The last message of a stream the server ends (the close follows)."""
    return {"type": "Error", "sequence_id": sequence_id, "code": code.upper(), "description": description}


@dataclass(frozen=True)
class ClientControl:
    kind: str  # one of CLIENT_TYPES
    body: dict[str, Any]


def parse_client_control(raw: str) -> ClientControl:
    """A text message; ``BadMessage`` when it is no Flux message. A ``Configure``'s
    fields are checked where it is applied (it is answered, never dropped)."""
    data = parse_message(raw)
    kind = message_type(data)
    if kind not in CLIENT_TYPES:
        raise unknown_type(kind, CLIENT_TYPES)
    if kind != "Configure":
        refuse_unknown_fields(data, kind, ())
    return ClientControl(kind, data)

