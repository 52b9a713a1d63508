"""ElevenLabs' text-to-speech socket messages: what the client sends on
``stream-input`` and ``multi-stream-input``, parsed, and what the server sends,
built in the camelCase the official SDK's types and Pipecat read
(``AudioOutput`` / ``AudioOutputMulti``, ``FinalOutput`` / ``FinalOutputMulti``).

Client messages carry no type: a message is what its fields say.

- ``{"text": " ", "voice_settings", "generation_config", "xi_api_key"}``: opens
  the stream (or, with ``context_id``, a context); ``xi_api_key`` (also spelled
  ``xi-api-key``) or ``authorization`` may carry the credential;
- ``{"text": "...", "flush"?, "try_trigger_generation"?}``: text to speak;
- ``{"text": ""}``: the end of the input (``stream-input``), or a keepalive of
  its context (``multi-stream-input``);
- ``{"flush": true, "context_id"}``, ``{"close_context": true, "context_id"}``,
  ``{"close_socket": true}`` (``multi-stream-input``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auth.credentials import Credential, CredentialKind, bearer_value
from gateway.errors import BadMessage
from gateway.fronts.elevenlabs.fields import check_generation_config, check_voice_settings
from gateway.protocol.json import optional_field, parse_message
from gateway.protocol.tts import TextLimits, text_too_long

MAX_CONTEXT_ID_CHARS = 128
MESSAGE_FIELDS = ("text", "context_id", "flush", "close_context", "close_socket", "try_trigger_generation",
                  "voice_settings", "generation_config", "xi_api_key", "xi-api-key", "authorization")


@dataclass(frozen=True)
class ClientMessage:
    text: str | None  # None: the message has no text field
    context_id: str | None = None
    flush: bool = False
    close_context: bool = False
    close_socket: bool = False
    credential: Credential | None = None


def parse_client_message(raw: str, limits: TextLimits) -> ClientMessage:
    """One client message; ``BadMessage`` naming the field when it cannot be used."""
    data = parse_message(raw)
    text = data.get("text")
    if text is not None:
        if not isinstance(text, str):
            raise BadMessage("text must be a string")
        if len(text) > limits.max_chars:
            raise text_too_long("text", len(text), limits)
    context_id = data.get("context_id")
    if context_id is not None and (not isinstance(context_id, str) or not 0 < len(context_id)
                                   <= MAX_CONTEXT_ID_CHARS):
        raise BadMessage(f"context_id must be a string of 1..{MAX_CONTEXT_ID_CHARS} characters")
    unknown = sorted(set(data) - set(MESSAGE_FIELDS))
    if unknown:
        raise BadMessage(f"{unknown[0][:40]}: not a field of a message here; the fields are: "
                         f"{', '.join(MESSAGE_FIELDS)}")
    check_voice_settings(data.get("voice_settings"), BadMessage)
    check_generation_config(data.get("generation_config"), BadMessage)
    flags = {name: _flag(data, name) for name in ("flush", "close_context", "close_socket", "try_trigger_generation")}
    if text is None and not (flags["flush"] or flags["close_context"] or flags["close_socket"]):
        raise BadMessage("a message needs \"text\", or \"flush\", \"close_context\" or \"close_socket\" set to true")
    return ClientMessage(text=text, context_id=context_id, flush=flags["flush"],
                         close_context=flags["close_context"], close_socket=flags["close_socket"],
                         credential=_credential(data))


def credential_of(raw: str) -> Credential | None:
    """The credential a message carries, read before anything else is parsed (a
    message that is no JSON object carries none)."""
    try:
        data = parse_message(raw)
    except BadMessage:
        return None
    return _credential(data)


def _flag(data: dict[str, Any], name: str) -> bool:
    return optional_field(data, name, bool, f"{name} must be true or false") or False


def _credential(data: dict[str, Any]) -> Credential | None:
    for key in ("xi_api_key", "xi-api-key"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return Credential(CredentialKind.API_KEY, value.strip())
    value = data.get("authorization")
    if isinstance(value, str) and value.strip():
        return bearer_value(value)
    return None


# ---- server -> client


def audio_message(audio_b64: str, alignment: dict[str, Any] | None, context_id: str | None) -> dict[str, Any]:
    """One chunk of audio; ``alignment`` (ElevenLabs' ``chars``, ``charStartTimesMs``,
    ``charDurationsMs``, relative to this chunk) goes out as both alignments."""
    message: dict[str, Any] = {"audio": audio_b64, "isFinal": False, "normalizedAlignment": alignment,
                               "alignment": alignment}
    if context_id is not None:
        message["contextId"] = context_id
    return message


def final_message(context_id: str | None) -> dict[str, Any]:
    """The last message of the stream, or of one context."""
    message: dict[str, Any] = {"isFinal": True}
    if context_id is not None:
        message["contextId"] = context_id
    return message


def error_message(code: str, message: str, status: int, context_id: str | None = None) -> dict[str, Any]:
    """An error in ElevenLabs' shape: ``message`` for people, ``error`` the machine code."""
    out: dict[str, Any] = {"message": message, "error": code, "code": status}
    if context_id is not None:
        out["contextId"] = context_id
    return out
