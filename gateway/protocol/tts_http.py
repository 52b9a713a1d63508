"""Bodies of the TTS HTTP routes: ``POST /v1/tts`` (``SynthesisRequest``) and
the OpenAI-compatible ``POST /v1/audio/speech`` (``SpeechRequest``).

The socket's messages and the limits both share are in gateway/protocol/tts.py.
Every failure is a ``BadRequest`` (``TooLarge`` for text over the limit) whose
message names the field and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.audio import parse_rate
from gateway.codecs.formats import HTTP_OUTPUTS, OPENAI_OUTPUTS, OutputFormat, parse_output_format
from gateway.errors import BadRequest, TooLarge
from gateway.protocol.tts import MAX_INSTRUCT_CHARS, MAX_LANGUAGE_CHARS, TextLimits, engine_options, seed_field

SYNTHESIS_FIELDS = ("text", "engine", "voice", "format", "sample_rate", "seed", "language", "instruct")


def refuse_unknown(data: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    """``BadRequest`` naming the first field of ``data`` that is not in ``fields``."""
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise BadRequest(f"{unknown[0][:40]}: not a field of this request; the fields are: {', '.join(fields)}")


@dataclass(frozen=True)
class SynthesisRequest:
    """The body of ``POST /v1/tts``; a field it does not define is refused."""

    text: str
    engine: str | None = None
    voice: str | None = None
    format: OutputFormat = OutputFormat.WAV
    sample_rate: int | None = None  # None: the format's default (G.711: 8 kHz; others: the engine's rate)
    seed: int | None = None
    language: str | None = None
    instruct: str | None = None

    def engine_options(self) -> dict[str, str]:
        return engine_options(self.language, self.instruct)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], limits: TextLimits) -> SynthesisRequest:
        """Raises ``BadRequest`` (or ``TooLarge`` for the text) naming the field."""
        refuse_unknown(data, SYNTHESIS_FIELDS)
        raw_format = data.get("format", "wav")
        try:
            fmt = parse_output_format(raw_format if isinstance(raw_format, str) else "", HTTP_OUTPUTS)
        except ValueError as exc:
            raise BadRequest(f"format: {exc}") from None
        rate = data.get("sample_rate")
        if rate is not None:
            if isinstance(rate, bool) or not isinstance(rate, int):
                raise BadRequest("sample_rate: must be an integer")
            try:
                rate = parse_rate(rate)
                fmt.check_rate(rate)
            except ValueError as exc:
                raise BadRequest(f"sample_rate: {exc}") from None
        seed = seed_field(data, "seed", BadRequest)
        return cls(text=body_text(data, "text", limits), engine=body_str(data, "engine"),
                   voice=body_str(data, "voice"), format=fmt, sample_rate=rate, seed=seed,
                   language=body_str(data, "language", MAX_LANGUAGE_CHARS),
                   instruct=body_str(data, "instruct", MAX_INSTRUCT_CHARS))


SPEECH_FIELDS = ("model", "input", "voice", "instructions", "response_format", "speed", "stream_format")
STREAM_FORMATS = ("audio", "sse")


@dataclass(frozen=True)
class SpeechRequest:
    """The body of the OpenAI-compatible ``POST /v1/audio/speech``. A field OpenAI
    does not define is refused, as OpenAI refuses it."""

    input: str
    model: str | None = None
    voice: str | None = None
    response_format: str = "mp3"  # OpenAI's default
    instructions: str | None = None  # None: none given (or blank)
    stream_format: str = "audio"  # or "sse": base64 audio in server-sent events

    @property
    def output(self) -> OutputFormat:
        return OPENAI_OUTPUTS[self.response_format]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], limits: TextLimits) -> SpeechRequest:
        refuse_unknown(data, SPEECH_FIELDS)
        text = body_text(data, "input", limits)
        fmt = data.get("response_format") or "mp3"
        if not isinstance(fmt, str) or fmt not in OPENAI_OUTPUTS:
            raise BadRequest(f"response_format: {str(fmt)[:20]!r} is not supported; use one of: "
                             f"{', '.join(OPENAI_OUTPUTS)}")
        stream_format = data.get("stream_format") or "audio"
        if stream_format not in STREAM_FORMATS:
            raise BadRequest(f"stream_format: {str(stream_format)[:20]!r} is not supported; use audio or sse")
        speed = data.get("speed")
        if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float)) or speed != 1):
            raise BadRequest("speed: only 1.0 is supported")
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            raise BadRequest("model: must be a string")
        instructions = data.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise BadRequest("instructions: must be a string")
        if instructions is not None and len(instructions) > MAX_INSTRUCT_CHARS:
            raise BadRequest(f"instructions: longer than {MAX_INSTRUCT_CHARS} characters")
        voice = data.get("voice")
        if isinstance(voice, dict):  # newer clients may send {"id": "..."}
            voice = voice.get("id")
            if not isinstance(voice, str):
                raise BadRequest("voice: an object must carry the voice's \"id\" as a string")
        if voice is not None and not isinstance(voice, str):
            raise BadRequest("voice: must be a string")
        return cls(input=text, model=model or None, voice=voice or None, response_format=fmt,
                   instructions=instructions.strip() if instructions and instructions.strip() else None,
                   stream_format=str(stream_format))


def body_text(data: Mapping[str, Any], field: str, limits: TextLimits) -> str:
    text = data.get(field)
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(f"{field}: required, a non-empty string")
    if len(text) > limits.max_chars:
        raise TooLarge(f"{field}: {len(text)} characters; the limit is {limits.max_chars}", code="text_too_long")
    return text


def body_str(data: Mapping[str, Any], field: str, max_chars: int | None = None) -> str | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{field}: must be a non-empty string")
    if max_chars is not None and len(value) > max_chars:
        raise BadRequest(f"{field}: longer than {max_chars} characters")
    return value
