"""Deepgram Flux TTS (``/v2/speak``): its query parameters, the client messages
it takes and the server messages it sends.

Shapes follow the official SDK's types (deepgram-sdk 7, ``speak.v2``:
``SpeakV2Speak``, ``SpeakV2Flush``, ``SpeakV2Interrupt``, ``SpeakV2Configure``,
``SpeakV2Close``; ``SpeakV2Connected``, ``SpeakV2SpeechStarted``,
``SpeakV2SpeechMetadata``, ``SpeakV2Flushed``, ``SpeakV2SpeechInterrupted``,
``SpeakV2SessionMetadata``, ``SpeakV2ConfigureSuccess``/``Failure``,
``SpeakV2Warning``, ``SpeakV2Error``), fields in the SDK's order.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import BadMessage, BadRequest
from gateway.fronts.deepgram.messages import MODEL_VERSION, model_uuid
from gateway.fronts.deepgram.params import ENCODINGS, G711_RATE
from gateway.protocol.json import parse_message
from gateway.protocol.query import query_bool, refuse_unknown_params

PARAMS = ("model", "encoding", "sample_rate", "speed", "expressivity", "mip_opt_out", "tag")
RATES = (8000, 16000, 24000, 32000, 44100, 48000)  # SpeakV2SampleRate
DEFAULT_RATE = 24000
MIN_SPEED, MAX_SPEED, SPEED_STEP = 0.5, 1.5, 0.05
ENGINE_SPEED = 1.0  # the one speed the engines here speak at
CLIENT_TYPES = ("Speak", "Flush", "Interrupt", "Clear", "Configure", "Close")
FIELDS = {"Speak": ("type", "text"), "Interrupt": ("type", "playback_offset"), "Configure": ("type", "speed"),
          "Flush": ("type",), "Clear": ("type",), "Close": ("type",)}
NO_CONTROLS = {"pronunciations_applied": 0, "breaks_applied": 0, "pronunciation_warnings": 0}
# the gateway's error codes as Flux names them; any other goes out as the gateway's own
FLUX_ERROR_CODES = {"bad_message": "MESSAGE-0000", "text_too_long": "DATA-0000", "too_large": "BIG-0000"}


@dataclass(frozen=True)
class SpeakV2Params:
    model: str  # flux-{voice}-{language}, or a voice of the engine
    encoding: str  # one of params.ENCODINGS
    sample_rate: int
    speed: float | None  # set in the query (then ENGINE_SPEED)


def parse_params(query: Mapping[str, str]) -> SpeakV2Params:
    """``/v2/speak``'s query. Raises ``BadRequest`` naming the parameter and why."""
    refuse_unknown_params(query, PARAMS)
    model = (query.get("model") or "").strip()
    if not model:
        raise BadRequest("model: required (flux-{voice}-{language}, e.g. flux-alexis-en)")
    if model.startswith("aura"):
        raise BadRequest(f"model: {model[:40]!r} is an Aura voice; /v2/speak takes Flux voices (flux-*), "
                         "/v1/speak takes Aura ones")
    encoding = (query.get("encoding") or "linear16").lower()
    if encoding not in ENCODINGS:
        raise BadRequest(f"encoding: {encoding[:20]!r} is not supported; use {', '.join(ENCODINGS)}")
    rate = _rate(query.get("sample_rate"), G711_RATE if encoding != "linear16" else DEFAULT_RATE)
    if encoding != "linear16" and rate != G711_RATE:
        raise BadRequest(f"sample_rate: {encoding} is sent at {G711_RATE} Hz here, not {rate}")
    speed = None
    if query.get("speed"):
        speed = _speed(query["speed"])
        if speed != ENGINE_SPEED:
            raise BadRequest(f"speed: {speed:g} is not supported; the engines here speak at speed 1.0 only")
    expressivity = query.get("expressivity")
    if expressivity not in (None, "", "0"):
        raise BadRequest(f"expressivity: {expressivity[:20]!r} is not supported; the engines here have no "
                         "expressivity control (use 0 or leave it out)")
    query_bool(query, "mip_opt_out", False)  # either value: this server keeps no audio or text
    return SpeakV2Params(model=model[:128], encoding=encoding, sample_rate=rate, speed=speed)


def _rate(raw: str | None, default: int) -> int:
    if not raw:
        return default
    if not raw.isdigit() or int(raw) not in RATES:
        raise BadRequest(f"sample_rate: {raw[:20]!r} is not one of {', '.join(map(str, RATES))}")
    return int(raw)


def _speed(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"speed: {raw[:20]!r} is not a number") from None
    problem = speed_problem(value)
    if problem is not None:
        raise BadRequest(f"speed: {problem[1]}")
    return value


def speed_problem(value: float) -> tuple[str, str] | None:
    """(Flux's failure code, why) when ``value`` is no speed Flux takes; None when it is one."""
    if not math.isfinite(value) or not MIN_SPEED - 1e-9 <= value <= MAX_SPEED + 1e-9:
        return "SPEED_OUT_OF_RANGE", f"{value:g} is outside {MIN_SPEED:g} to {MAX_SPEED:g}"
    if abs(value / SPEED_STEP - round(value / SPEED_STEP)) > 1e-6:
        return "SPEED_INCREMENT_INVALID", f"{value:g} is not a multiple of {SPEED_STEP:g}"
    return None


# ---- client -> server


@dataclass(frozen=True)
class ClientMessage:
    kind: str  # one of CLIENT_TYPES
    text: str = ""  # Speak
    playback_offset_ms: int | None = None  # Interrupt
    speed: float | None = None  # Configure


def parse_client_message(raw: str) -> ClientMessage:
    """One text message. ``BadMessage`` naming the field and why."""
    data = parse_message(raw)
    kind = data.get("type")
    if kind not in CLIENT_TYPES:
        raise BadMessage(f"type: {str(kind)[:40]!r} is not a /v2/speak message; send one of "
                         f"{', '.join(CLIENT_TYPES)}")
    unknown = sorted(k for k in data if k not in FIELDS[kind])
    if unknown:
        known = ", ".join(FIELDS[kind][1:]) or "none besides type"
        raise BadMessage(f"{kind}.{unknown[0][:40]}: not a field of {kind} here; its fields: {known}")
    if kind == "Speak":
        text = data.get("text")
        if not isinstance(text, str):
            raise BadMessage("Speak.text must be a string")
        return ClientMessage(kind, text=text)
    if kind == "Interrupt":
        return ClientMessage(kind, playback_offset_ms=_offset(data.get("playback_offset")))
    if kind == "Configure":
        speed = data.get("speed")
        if speed is not None and (isinstance(speed, bool) or not isinstance(speed, int | float)):
            raise BadMessage("Configure.speed must be a number")
        return ClientMessage(kind, speed=None if speed is None else float(speed))
    return ClientMessage(kind)


def _offset(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadMessage("Interrupt.playback_offset must be an object {\"type\": \"time_ms\", \"value\": ms}")
    if value.get("type", "time_ms") != "time_ms":
        raise BadMessage(f"Interrupt.playback_offset.type: {str(value.get('type'))[:20]!r} is not supported; "
                         "time_ms is the one form")
    unknown = sorted(k for k in value if k not in ("type", "value"))
    if unknown:
        raise BadMessage(f"Interrupt.playback_offset.{str(unknown[0])[:40]}: not a field here; its fields: type, value")
    ms = value.get("value")
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise BadMessage("Interrupt.playback_offset.value must be a whole number of milliseconds, 0 or more")
    return ms


# ---- server -> client


def new_speech_id() -> str:
    return f"dg_sp_{secrets.token_hex(6)}"


def connected(request_id: str, model_name: str) -> dict[str, Any]:
    return {"type": "Connected", "request_id": request_id, "model_name": model_name,
            "model_version": MODEL_VERSION, "model_uuids": [model_uuid(model_name)]}


def speech_started(speech_id: str) -> dict[str, Any]:
    return {"type": "SpeechStarted", "speech_id": speech_id}


def turn_metadata(speech_id: str, audio_ms: int, chars: int) -> dict[str, Any]:
    """The fields ``SpeechMetadata`` and ``SpeechInterrupted.metadata`` share."""
    return {"speech_id": speech_id, "audio_duration_ms": audio_ms, "input_character_count": chars,
            "billable_character_count": chars, "controls_applied": dict(NO_CONTROLS)}


def speech_metadata(speech_id: str, audio_ms: int, chars: int) -> dict[str, Any]:
    return {"type": "SpeechMetadata", **turn_metadata(speech_id, audio_ms, chars)}


def flushed(speech_id: str) -> dict[str, Any]:
    return {"type": "Flushed", "speech_id": speech_id}


def speech_interrupted(played_ms: int, spoken: str | None, remaining: str | None,
                       metadata: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "SpeechInterrupted", "audio_played_ms": played_ms}
    if spoken is not None and remaining is not None:
        out.update(text_spoken=spoken, text_remaining=remaining)
    out["metadata"] = metadata
    return out


def session_metadata(audio_ms: int, chars: int) -> dict[str, Any]:
    return {"type": "SessionMetadata", "total_audio_duration_ms": audio_ms, "total_input_character_count": chars,
            "total_billable_character_count": chars}


def configure_success(speed: float | None) -> dict[str, Any]:
    return {"type": "ConfigureSuccess", "applied": {} if speed is None else {"speed": speed}}


def configure_failure(code: str, description: str, value: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "ConfigureFailure", "code": code, "field": "speed"}
    if value is not None:
        out["value"] = value
    out["description"] = description
    return out


def warning(code: str, description: str) -> dict[str, Any]:
    return {"type": "Warning", "code": code, "description": description}


def error(code: str, description: str) -> dict[str, Any]:
    """Flux's ``Error``; ``code`` a gateway code, sent as Flux's name for it when it has one."""
    return {"type": "Error", "code": FLUX_ERROR_CODES.get(code, code), "description": description}
