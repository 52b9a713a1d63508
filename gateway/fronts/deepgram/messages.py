"""Deepgram's wire messages: the JSON the ``/v1/listen`` and ``/v1/speak``
sockets send, built from the gateway's own events, and the client messages
they take.

Shapes follow the official SDK's types (deepgram-sdk 7: ``ListenV1Results``,
``ListenV1Metadata``, ``ListenV1SpeechStarted``, ``ListenV1UtteranceEnd``,
``ListenV1Error``, ``SpeakV1Metadata``, ``SpeakV1Flushed``, ``SpeakV1Cleared``,
``SpeakV1Warning``). Field order matches what Deepgram sends.
"""

from __future__ import annotations

import datetime
import re
import uuid
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadMessage
from gateway.protocol.json import parse_message, refuse_unknown_fields, unknown_type

CHANNEL = [0, 1]  # channel index and channel count, as Deepgram writes them
MODEL_VERSION = "voxgate"
_WORD_EDGE = re.compile(r"^[^\w']+|[^\w']+$")


def model_uuid(name: str) -> str:
    """A stable UUID for a model name (Deepgram identifies models by UUID)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"voxgate:model:{name}"))


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    arch: str

    @property
    def uuid(self) -> str:
        return model_uuid(self.name)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": MODEL_VERSION, "arch": self.arch}


# ---- /v1/listen


def estimated_words(text: str, start: float, end: float) -> list[dict[str, Any]]:
    """Deepgram's ``words`` for a transcript whose word timings are unknown: the
    words spread evenly over the span, by length. ``word`` is lower-case without
    punctuation, ``punctuated_word`` as transcribed (Deepgram's two forms)."""
    tokens = text.split()
    if not tokens:
        return []
    weights = [max(1, len(t)) for t in tokens]
    total, span = sum(weights), max(0.0, end - start)
    out, at = [], start
    for token, weight in zip(tokens, weights, strict=True):
        until = at + span * weight / total
        out.append({"word": _WORD_EDGE.sub("", token).lower() or token.lower(), "start": round(at, 3),
                    "end": round(until, 3), "confidence": 1.0, "punctuated_word": token})
        at = until
    return out


def results(*, request_id: str, model: ModelInfo, text: str, start: float, end: float, is_final: bool,
            speech_final: bool, from_finalize: bool) -> dict[str, Any]:
    """One ``Results`` message for a transcript covering ``start``..``end`` (seconds)."""
    words = estimated_words(text, start, end)
    return {"type": "Results", "channel_index": CHANNEL, "duration": round(max(0.0, end - start), 3),
            "start": round(start, 3), "is_final": is_final, "speech_final": speech_final,
            "channel": {"alternatives": [{"transcript": text, "confidence": 1.0 if text else 0.0,
                                          "words": words}]},
            "metadata": {"request_id": request_id, "model_info": model.to_dict(), "model_uuid": model.uuid},
            "from_finalize": from_finalize}


def speech_started(at: float) -> dict[str, Any]:
    return {"type": "SpeechStarted", "channel": [0], "timestamp": round(at, 3)}


def utterance_end(last_word_end: float) -> dict[str, Any]:
    return {"type": "UtteranceEnd", "channel": CHANNEL, "last_word_end": round(last_word_end, 3)}


def listen_metadata(*, request_id: str, created: str, duration_s: float, sha256: str,
                    model: ModelInfo) -> dict[str, Any]:
    """The summary sent after the last ``Results`` of a ``CloseStream``."""
    return {"type": "Metadata", "transaction_key": "deprecated", "request_id": request_id, "sha256": sha256,
            "created": created, "duration": round(duration_s, 3), "channels": 1, "models": [model.uuid],
            "model_info": {model.uuid: model.to_dict()}}


def listen_error(code: str, message: str) -> dict[str, Any]:
    """An in-stream error; ``variant`` is Deepgram's category, ``code`` the gateway's machine code."""
    variant = "SchemaError" if code == "bad_message" else code
    return {"type": "Error", "variant": variant, "description": message, "code": code}


@dataclass(frozen=True)
class ListenControl:
    kind: str  # "KeepAlive" | "Finalize" | "CloseStream"


LISTEN_TYPES = ("KeepAlive", "Finalize", "CloseStream")


def parse_listen_control(raw: str) -> ListenControl:
    """A control message; a field Deepgram does not define for it is refused."""
    data = parse_message(raw)
    kind = _message_type(data, LISTEN_TYPES)
    refuse_unknown_fields(data, kind, ())
    return ListenControl(kind)


# ---- /v1/speak


def speak_metadata(*, request_id: str, model: ModelInfo) -> dict[str, Any]:
    return {"type": "Metadata", "request_id": request_id, "model_name": model.name,
            "model_version": MODEL_VERSION, "model_uuid": model.uuid}


def flushed(sequence_id: int) -> dict[str, Any]:
    return {"type": "Flushed", "sequence_id": sequence_id}


def cleared(sequence_id: int) -> dict[str, Any]:
    return {"type": "Cleared", "sequence_id": sequence_id}


def warning(code: str, message: str) -> dict[str, Any]:
    """A non-fatal problem; the SDK reads ``description``/``code``, older clients ``warn_msg``/``warn_code``."""
    return {"type": "Warning", "description": message, "code": code, "warn_code": code, "warn_msg": message}


@dataclass(frozen=True)
class SpeakMessage:
    kind: str  # "Speak" | "Flush" | "Clear" | "Close"
    text: str = ""


SPEAK_TYPES = ("Speak", "Flush", "Clear", "Close")


def parse_speak_message(raw: str) -> SpeakMessage:
    data = parse_message(raw)
    kind = _message_type(data, SPEAK_TYPES)
    refuse_unknown_fields(data, kind, ("text",) if kind == "Speak" else ())
    if kind == "Speak":
        text = data.get("text")
        if not isinstance(text, str):
            raise BadMessage("Speak.text must be a string")
        return SpeakMessage(kind, text)
    return SpeakMessage(kind)


def _message_type(raw: str | dict[str, Any], allowed: tuple[str, ...]) -> str:
    data = parse_message(raw) if isinstance(raw, str) else raw
    kind = data.get("type")
    if not isinstance(kind, str):
        raise BadMessage(f"a message needs a string \"type\", one of: {', '.join(allowed)}")
    if kind not in allowed:
        raise unknown_type(kind, allowed)
    return kind
