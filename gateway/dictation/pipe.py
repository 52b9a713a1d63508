"""The gateway's side of the ASR sidecar's pipe vocabulary (engines/asr/server.py):
the ops it writes, and the events it reads, typed here once.

``read_event`` turns one frame header from the sidecar into a frozen
dataclass: a stream's transcript events become the protocol events of
gateway/protocol/dictation.py (with the sample positions the replay log needs,
which are never sent to a client), its errors ``ErrorEvent``; the rest are the
supervisor's own (``Hello``, ``Fatal``, ``Pong``, ``Lag``, ``Transcription``,
``RequestFailed``). Past this module nothing reads an ``"ev"`` string. A header
that is not a known event raises ``PipeError`` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import CODES
from gateway.protocol.common import ErrorEvent
from gateway.protocol.dictation import (
    Discarded,
    EagerFinal,
    Final,
    Finalized,
    Partial,
    SpeechStarted,
    TranscriptEvent,
    TurnResumed,
)

FALLBACK_CODE = "asr_failed"  # a sidecar error whose code the gateway's table lacks


class PipeError(ValueError):
    """A frame from the sidecar that is not an event the gateway knows."""


# ---- ops the gateway writes


def open_op(stream: str, options: Mapping[str, Any], resume: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": "open", "stream": stream, **options, **resume}


def audio_op(stream: str) -> dict[str, Any]:
    return {"op": "audio", "stream": stream}


def finalize_op(stream: str, mark: str | None) -> dict[str, Any]:
    header: dict[str, Any] = {"op": "finalize", "stream": stream}
    if mark is not None:
        header["id"] = mark
    return header


def configure_op(stream: str, prompt: str, reset_context: bool = False,
                 terms: Sequence[str] = ()) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "configure", "stream": stream, "prompt": prompt, "terms": list(terms)}
    if reset_context:
        op["reset_context"] = True
    return op


def end_op(stream: str) -> dict[str, Any]:
    return {"op": "end", "stream": stream}


def close_op(stream: str) -> dict[str, Any]:
    return {"op": "close", "stream": stream}


PING_OP: dict[str, Any] = {"op": "ping"}


def transcribe_op(req: str, language: str | None, word_timestamps: bool, prompt: str = "",
                  terms: Sequence[str] = ()) -> dict[str, Any]:
    return {"op": "transcribe", "req": req, "language": language, "word_timestamps": word_timestamps,
            "prompt": prompt, "terms": list(terms)}


# ---- events the sidecar sends


@dataclass(frozen=True)
class Hello:
    """The sidecar loaded its model and takes frames."""

    model: str
    multilingual: bool | None
    languages: list[str] | None


@dataclass(frozen=True)
class Fatal:
    """The sidecar could not start; ``message`` says why."""

    message: str


@dataclass(frozen=True)
class Pong:
    """The answer to a ``ping``."""


@dataclass(frozen=True)
class Lag:
    """Once a second while busy: how far behind each stream is, and how long the running decode has taken."""

    streams: Mapping[str, float] = field(default_factory=dict)
    busy_s: float | None = None


@dataclass(frozen=True)
class Ended:
    """The sidecar finished a stream after its ``end``: every final is out."""

    utterances: int
    audio_s: float


@dataclass(frozen=True)
class Transcription:
    """The answer to a ``transcribe`` request: ``text``, ``language``, ``duration``, ``segments``, ``words``."""

    req: str
    result: Mapping[str, Any]


@dataclass(frozen=True)
class RequestFailed:
    req: str
    error: ErrorEvent


# What a stream's queue is given from the pipe.
StreamItem = TranscriptEvent | Ended | ErrorEvent


@dataclass(frozen=True)
class ForStream:
    """An event of one stream."""

    stream: str
    event: StreamItem


SidecarEvent = Hello | Fatal | Pong | Lag | Transcription | RequestFailed | ForStream


def read_event(header: Mapping[str, Any]) -> SidecarEvent:
    """The typed event of one frame header; ``PipeError`` when it is not one."""
    kind = header.get("ev")
    try:
        if kind == "ready":
            return Hello(str(header.get("model", "")), _optional_bool(header.get("multilingual")),
                         _languages(header.get("languages")))
        if kind == "fatal":
            return Fatal(str(header.get("message", "")))
        if kind == "pong":
            return Pong()
        if kind == "lag":
            busy = header.get("busy_s")
            busy_s = float(busy) if isinstance(busy, int | float) and not isinstance(busy, bool) else None
            return Lag({str(k): float(v) for k, v in dict(header.get("streams") or {}).items()}, busy_s)
        if "req" in header:
            req = str(header["req"])
            if kind == "transcription":
                return Transcription(req, {k: v for k, v in header.items() if k not in ("ev", "req")})
            if kind == "error":
                return RequestFailed(req, _error(header))
            raise PipeError(f"event {kind!r} does not answer a request")
        return ForStream(str(header.get("stream", "")), _stream_event(kind, header))
    except PipeError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong type
        raise PipeError(f"{kind!r} event: {exc!r}") from None


def _stream_event(kind: Any, h: Mapping[str, Any]) -> StreamItem:
    if kind == "speech_started":
        return SpeechStarted(int(h["utterance"]), float(h["at"]), int(h.get("start_sample", 0)))
    if kind == "partial":
        return Partial(int(h["utterance"]), str(h["text"]), str(h["stable"]), float(h["start"]), float(h["end"]),
                       float(h.get("lag_s", 0.0)))
    if kind == "eager_final":
        return EagerFinal(int(h["utterance"]), str(h["text"]), float(h["start"]), float(h["end"]),
                          str(h.get("language", "")), h.get("words"))
    if kind == "turn_resumed":
        return TurnResumed(int(h["utterance"]), float(h["at"]))
    if kind == "final":
        return Final(int(h["utterance"]), str(h["text"]), float(h["start"]), float(h["end"]),
                     str(h.get("language", "")), h.get("words"), float(h.get("lag_s", 0.0)),
                     int(h.get("end_sample", 0)), bool(h.get("endpoint", False)),
                     str(h["decoded"]) if h.get("decoded") is not None else None,
                     float(h["turn_confidence"]) if h.get("turn_confidence") is not None else None)
    if kind == "discarded":
        return Discarded(int(h["utterance"]), int(h.get("end_sample", 0)))
    if kind == "finalized":
        utterance = h.get("utterance")
        return Finalized(str(h.get("id")), int(utterance) if utterance is not None else None)
    if kind == "ended":
        return Ended(int(h.get("utterances", 0)), float(h.get("audio_s", 0.0)))
    if kind == "error":
        return _error(h)
    raise PipeError(f"unknown event {kind!r}")


def _error(h: Mapping[str, Any]) -> ErrorEvent:
    code = str(h.get("code", FALLBACK_CODE))
    wire = CODES.get(code) or CODES[FALLBACK_CODE]
    return ErrorEvent(wire.code, str(h.get("message", "")), wire.retryable)


def _optional_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _languages(value: Any) -> list[str] | None:
    return None if value is None else [str(v) for v in value]
