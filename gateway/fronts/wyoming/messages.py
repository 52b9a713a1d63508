"""The Wyoming events this front reads and writes, as small typed shapes.

Client -> server, per connection::

    describe                                   -> info
    ping                                       -> pong
    select-program {name}                      (picks the asr or tts program for the connection)
    transcribe? audio-start audio-chunk* audio-stop
        -> [transcript-start transcript-chunk*] transcript [transcript-stop]
    synthesize                                 -> audio-start audio-chunk* audio-stop
    synthesize-start synthesize-chunk* synthesize? synthesize-stop
        -> (audio-start audio-chunk* audio-stop)* synthesize-stopped

Anything the server cannot use gets ``error {text, code}`` (codes from
gateway/errors.py) and the connection goes on, unless the bytes themselves
are broken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.asr.prompt_text import term_list_text
from gateway.errors import BadMessage
from gateway.fronts.wyoming.wire import Event
from gateway.protocol.json import optional_field
from gateway.protocol.vocabulary import VocabularyError, parse_terms

# vad_sensitivity -> trailing silence that ends the voice command (ms)
VAD_SILENCE_MS = {"aggressive": 400, "default": 700, "relaxed": 1200}
MAX_RATE = 48000
MIN_RATE = 8000


def _optional_str(data: dict[str, Any], name: str, kind: str) -> str | None:
    return optional_field(data, name, str, f"{kind}: \"{name}\" must be a string")


@dataclass(frozen=True)
class Transcribe:
    language: str | None = None
    name: str | None = None
    vad_sensitivity: str | None = None
    terms: tuple[str, ...] = ()  # transcript_names, then transcript_terms (Wyoming 1.8+)

    @property
    def prompt(self) -> str:
        """The recognizer's context: the names and terms as one term list."""
        return term_list_text(self.terms)

    @classmethod
    def from_event(cls, event: Event) -> Transcribe:
        language = _optional_str(event.data, "language", event.type)
        sensitivity = _optional_str(event.data, "vad_sensitivity", event.type)
        if sensitivity is not None and sensitivity not in VAD_SILENCE_MS:
            raise BadMessage(f"{event.type}: \"vad_sensitivity\" {sensitivity[:20]!r} is not one of: "
                             f"{', '.join(VAD_SILENCE_MS)}")
        return cls(language=language.lower() if language else None,
                   name=_optional_str(event.data, "name", event.type), vad_sensitivity=sensitivity,
                   terms=_terms(event))

    @property
    def endpoint_silence_ms(self) -> int | None:
        """Trailing silence that ends the command when the client asked for endpointing, else None."""
        if self.vad_sensitivity is None:
            return None
        return VAD_SILENCE_MS[self.vad_sensitivity]


def _terms(event: Event) -> tuple[str, ...]:
    """``transcript_names`` (first: they take priority) and ``transcript_terms``, one list."""
    lists = []
    for name in ("transcript_names", "transcript_terms"):
        value = event.data.get(name)
        if value is not None and not isinstance(value, list):
            raise BadMessage(f"{event.type}: \"{name}\" must be a list of strings")
        lists.append((name, value or []))
    try:
        names, terms = (parse_terms(values, f"{event.type}: {name}") for name, values in lists)
        return parse_terms([*names, *terms], f"{event.type}: transcript_names and transcript_terms")
    except VocabularyError as exc:
        raise BadMessage(str(exc)) from None


@dataclass(frozen=True)
class AudioFormat:
    rate: int
    width: int
    channels: int

    @classmethod
    def from_event(cls, event: Event) -> AudioFormat:
        values = []
        for name in ("rate", "width", "channels"):
            value = event.data.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadMessage(f"{event.type}: \"{name}\" must be an integer")
            values.append(value)
        rate, width, channels = values
        if not MIN_RATE <= rate <= MAX_RATE:
            raise BadMessage(f"{event.type}: rate {rate} is out of range ({MIN_RATE}..{MAX_RATE})")
        if width not in (1, 2, 4):
            raise BadMessage(f"{event.type}: width {width} is not 1, 2 or 4 bytes")
        if not 1 <= channels <= 8:
            raise BadMessage(f"{event.type}: channels {channels} is out of range (1..8)")
        return cls(rate, width, channels)


@dataclass(frozen=True)
class VoiceRequest:
    name: str | None = None
    language: str | None = None
    speaker: str | None = None

    @classmethod
    def from_event(cls, event: Event) -> VoiceRequest:
        voice = event.data.get("voice") or {}
        if not isinstance(voice, dict):
            raise BadMessage(f"{event.type}: \"voice\" must be an object")
        return cls(name=_optional_str(voice, "name", event.type), language=_optional_str(voice, "language", event.type),
                   speaker=_optional_str(voice, "speaker", event.type))


def text_of(event: Event) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise BadMessage(f"{event.type}: \"text\" must be a string")
    return text


def program_name(event: Event) -> str:
    name = event.data.get("name")
    if not isinstance(name, str) or not name:
        raise BadMessage(f"{event.type}: \"name\" must be a non-empty string")
    return name


# ---- server -> client


def error(text: str, code: str) -> Event:
    return Event("error", {"text": text, "code": code})


def pong(text: str | None) -> Event:
    return Event("pong", {"text": text})


def audio_start(rate: int) -> Event:
    return Event("audio-start", {"rate": rate, "width": 2, "channels": 1})


def audio_chunk(rate: int, pcm: bytes) -> Event:
    return Event("audio-chunk", {"rate": rate, "width": 2, "channels": 1}, pcm)


def audio_stop() -> Event:
    return Event("audio-stop", {})


def synthesize_stopped() -> Event:
    return Event("synthesize-stopped", {})


def transcript(text: str, language: str | None) -> Event:
    data: dict[str, Any] = {"text": text}
    if language:
        data["language"] = language
    return Event("transcript", data)


def transcript_start(language: str | None) -> Event:
    return Event("transcript-start", {"language": language} if language else {})


def transcript_chunk(text: str) -> Event:
    return Event("transcript-chunk", {"text": text})


def transcript_stop() -> Event:
    return Event("transcript-stop", {})
