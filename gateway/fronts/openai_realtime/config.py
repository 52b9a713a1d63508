"""The configuration of one OpenAI Realtime transcription session: what
``session.update`` may set, how it maps onto the dictation session, and the
session object that ``session.created`` / ``session.updated`` report.

OpenAI's shape (GA Realtime API, ``type: "transcription"``)::

    {"type": "transcription",
     "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                         "transcription": {"model", "language", "prompt"},
                         "turn_detection": {"type": "server_vad", "threshold",
                                            "prefix_padding_ms", "silence_duration_ms"} | null,
                         "noise_reduction": {"type": "near_field"} | null}},
     "include": [...]}

An update names only what it changes; a field left out keeps its value, and
``turn_detection: null`` turns voice activity detection off (the client commits).

Every field is honoured or refused by name (``UpdateError``), except
``turn_detection.prefix_padding_ms``, which LiveKit's plugin sends on every
session: it is accepted and reported back, and the audio of an utterance starts
where the recognizer's voice detector puts it. Honoured: ``format``,
``transcription.model`` (the recognizer's name or OpenAI's transcription
models, all run by this server's recognizer), ``transcription.language``,
``turn_detection`` (server_vad, ``silence_duration_ms``, ``threshold`` 0.5: the
voice detector's own) or null, ``transcription.prompt`` and
``transcription.keywords`` (the recognizer's context: the prompt as written, the
keywords as a term list; gateway/protocol/vocabulary.py's limits; both may
change mid-session). Refused: ``noise_reduction``,
``include`` entries, other thresholds, fields OpenAI does not define.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from engines.asr.prompt_text import term_list_text
from gateway.codecs.formats import InputEncoding
from gateway.dictation.asr_gate import shown_languages, supports_language
from gateway.protocol.dictation import MAX_SILENCE_MS, MIN_SILENCE_MS, DictationParams
from gateway.protocol.transcription import OPENAI_MODELS
from gateway.protocol.vocabulary import VocabularyError, parse_prompt, parse_terms

PCM_RATE = 24000  # OpenAI's audio/pcm is 16-bit mono at 24 kHz, nothing else
G711_RATE = 8000
FORMATS = {"audio/pcm": (InputEncoding.PCM_S16LE, PCM_RATE), "audio/pcmu": (InputEncoding.MULAW, G711_RATE),
           "audio/pcma": (InputEncoding.ALAW, G711_RATE)}
NOISE_REDUCTION_TYPES = ("near_field", "far_field")
REALTIME_MODELS = (*OPENAI_MODELS, "gpt-realtime-whisper", "gpt-live-transcribe")
VAD_THRESHOLD = 0.5  # the recognizer's voice detector decides speech at this probability
# the keys each object of an update may carry; any other is refused
SESSION_KEYS = ("type", "audio", "include")
AUDIO_INPUT_KEYS = ("format", "transcription", "turn_detection", "noise_reduction")
TRANSCRIPTION_KEYS = ("model", "language", "prompt", "keywords")
TURN_DETECTION_KEYS = ("type", "threshold", "prefix_padding_ms", "silence_duration_ms")
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")


class UpdateError(ValueError):
    """A ``session.update`` field that cannot be used: ``param`` names it (OpenAI's
    dotted path), the message says why. Nothing of that update is applied."""

    def __init__(self, param: str, message: str, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True)
class ServerVad:
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    def to_dict(self) -> dict[str, Any]:
        return {"type": "server_vad", "threshold": self.threshold, "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms}


@dataclass(frozen=True)
class TranscriptionConfig:
    format: str = "audio/pcm"
    model: str = "gpt-4o-transcribe"
    language: str | None = None  # None: detected per utterance
    prompt: str = ""
    keywords: tuple[str, ...] = ()
    turn_detection: ServerVad | None = ServerVad()  # None: the client commits the buffer
    noise_reduction: str | None = None
    include: tuple[str, ...] = ()

    @property
    def encoding(self) -> InputEncoding:
        return FORMATS[self.format][0]

    @property
    def sample_rate(self) -> int:
        return FORMATS[self.format][1]

    @property
    def decoder_prompt(self) -> str:
        """The recognizer's context: the prompt, then the keywords as a term list."""
        return " ".join(p for p in (self.prompt, term_list_text(self.keywords)) if p)

    def dictation_params(self) -> DictationParams:
        """The dictation session this configuration runs on. Without voice activity
        detection utterances still end at the longest pause the recognizer allows;
        their finals are joined into the committed item's one transcript."""
        silence_ms = self.turn_detection.silence_duration_ms if self.turn_detection else MAX_SILENCE_MS
        return DictationParams(sample_rate=self.sample_rate, encoding=self.encoding,
                               language=self.language or "auto", interim=True, word_timestamps=False,
                               silence_ms=min(max(silence_ms, MIN_SILENCE_MS), MAX_SILENCE_MS),
                               prompt=self.decoder_prompt, terms=self.keywords)

    def session_object(self, session_id: str) -> dict[str, Any]:
        """The ``session`` of ``session.created`` / ``session.updated``."""
        fmt: dict[str, Any] = {"type": self.format}
        if self.format == "audio/pcm":
            fmt["rate"] = PCM_RATE
        return {"type": "transcription", "object": "realtime.transcription_session", "id": session_id,
                "audio": {"input": {
                    "format": fmt,
                    "transcription": {"model": self.model, "language": self.language, "prompt": self.prompt,
                                      **({"keywords": list(self.keywords)} if self.keywords else {})},
                    "turn_detection": self.turn_detection.to_dict() if self.turn_detection else None,
                    "noise_reduction": {"type": self.noise_reduction} if self.noise_reduction else None}},
                "include": list(self.include) or None}


def apply_update(config: TranscriptionConfig, session: Any, languages: list[str],
                 asr_model: str = "") -> TranscriptionConfig:
    """``config`` with the fields of a ``session.update``'s ``session`` applied.
    ``languages``: what the recognizer knows (empty: anything); ``asr_model``: its
    name. Raises ``UpdateError``."""
    if not isinstance(session, dict):
        raise UpdateError("session", "session must be an object")
    _known_keys(session, SESSION_KEYS, "session")
    kind = session.get("type", "transcription")
    if kind != "transcription":
        raise UpdateError("session.type", f"session.type {str(kind)[:40]!r} is not supported: this server "
                                          "runs transcription sessions only (connect with ?intent=transcription)")
    include = session.get("include", config.include)
    if include is None:
        include = ()
    if not isinstance(include, (list, tuple)) or not all(isinstance(i, str) for i in include):
        raise UpdateError("session.include", "session.include must be a list of strings")
    if include:
        raise UpdateError("session.include", f"session.include: {str(include[0])[:60]!r} is not produced here "
                          "(no logprobs); send an empty list or leave it out")
    audio = _object(session, "audio", "session.audio")
    _known_keys(audio, ("input",), "session.audio")
    audio_input = _object(audio, "input", "session.audio.input")
    _known_keys(audio_input, AUDIO_INPUT_KEYS, "session.audio.input")
    if "format" in audio_input:
        config = replace(config, format=_format(audio_input["format"]))
    if "transcription" in audio_input:
        config = _transcription(config, audio_input["transcription"], languages, asr_model)
    if "turn_detection" in audio_input:
        config = replace(config, turn_detection=_turn_detection(audio_input["turn_detection"]))
    if "noise_reduction" in audio_input:
        config = replace(config, noise_reduction=_noise_reduction(audio_input["noise_reduction"]))
    return config


def _known_keys(value: dict[str, Any], keys: tuple[str, ...], param: str) -> None:
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise UpdateError(f"{param}.{unknown[0][:40]}", f"{param}.{unknown[0][:40]} is not a field here; "
                          f"{param} takes: {', '.join(keys)}", code="unknown_parameter")


def _object(parent: dict[str, Any], key: str, param: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UpdateError(param, f"{param} must be an object")
    return value


def _format(value: Any) -> str:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise UpdateError("session.audio.input.format", "session.audio.input.format must be an object with a "
                          f"\"type\", one of: {', '.join(FORMATS)}")
    kind = value["type"]
    if kind not in FORMATS:
        raise UpdateError("session.audio.input.format.type", f"format {kind[:40]!r} is not supported; use one of: "
                          f"{', '.join(FORMATS)}")
    rate = value.get("rate")
    if kind == "audio/pcm" and rate is not None and rate != PCM_RATE:
        raise UpdateError("session.audio.input.format.rate", f"audio/pcm is 24000 Hz only, not {str(rate)[:12]}")
    return str(kind)


def _transcription(config: TranscriptionConfig, value: Any, languages: list[str],
                   asr_model: str) -> TranscriptionConfig:
    param = "session.audio.input.transcription"
    if value is None:  # transcription switched off: this server has nothing else to do, so it stays on
        return config
    if not isinstance(value, dict):
        raise UpdateError(param, f"{param} must be an object or null")
    _known_keys(value, TRANSCRIPTION_KEYS, param)
    model = value.get("model", config.model)
    if model is not None and not isinstance(model, str):
        raise UpdateError(f"{param}.model", f"{param}.model must be a string")
    if model is not None and model not in REALTIME_MODELS and model != asr_model:
        served = ", ".join(([asr_model] if asr_model else []) + list(REALTIME_MODELS))
        raise UpdateError(f"{param}.model", f"model {model[:60]!r} is not served here; use one of: {served} "
                          "(all run by this server's recognizer)")
    language = value.get("language", config.language)
    if language is not None:
        if not isinstance(language, str) or not _LANGUAGE.match(language.lower()):
            raise UpdateError(f"{param}.language", f"{param}.language must be an ISO-639-1 code such as 'en'")
        language = language.lower()
        if not supports_language(languages, language):
            raise UpdateError(f"{param}.language", f"language {language!r} is not supported by the recognizer "
                              f"here (available: {shown_languages(languages)})", code="unsupported_language")
    prompt, keywords = value.get("prompt", config.prompt), value.get("keywords", config.keywords)
    try:
        prompt = parse_prompt("" if prompt is None else prompt, f"{param}.prompt")
    except VocabularyError as exc:
        raise UpdateError(f"{param}.prompt", str(exc)) from None
    if keywords is not None and not isinstance(keywords, (list, tuple)):
        raise UpdateError(f"{param}.keywords", f"{param}.keywords must be a list of strings")
    try:
        terms = parse_terms(keywords or (), f"{param}.keywords")
    except VocabularyError as exc:
        raise UpdateError(f"{param}.keywords", str(exc)) from None
    return replace(config, model=(model or config.model)[:128], language=language, prompt=prompt, keywords=terms)


def _turn_detection(value: Any) -> ServerVad | None:
    param = "session.audio.input.turn_detection"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UpdateError(param, f"{param} must be an object or null")
    _known_keys(value, TURN_DETECTION_KEYS, param)
    kind = value.get("type", "server_vad")
    if kind != "server_vad":
        raise UpdateError(f"{param}.type", f"turn detection {str(kind)[:40]!r} is not supported; use "
                          "\"server_vad\" or null")
    vad = ServerVad()
    threshold = value.get("threshold", vad.threshold)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise UpdateError(f"{param}.threshold", f"{param}.threshold must be a number between 0.0 and 1.0")
    if threshold != VAD_THRESHOLD:
        raise UpdateError(f"{param}.threshold", f"{param}.threshold {threshold:g} is not supported: the "
                          f"recognizer's voice detector decides speech at {VAD_THRESHOLD:g}; send {VAD_THRESHOLD:g} "
                          "or leave it out")
    padding = _ms(value, "prefix_padding_ms", vad.prefix_padding_ms, param)
    silence = _ms(value, "silence_duration_ms", vad.silence_duration_ms, param)
    return ServerVad(threshold=float(threshold), prefix_padding_ms=padding, silence_duration_ms=silence)


def _ms(value: dict[str, Any], key: str, default: int, param: str) -> int:
    raw = value.get(key, default)
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 60000:
        raise UpdateError(f"{param}.{key}", f"{param}.{key} must be an integer number of milliseconds, 0..60000")
    return raw


def _noise_reduction(value: Any) -> str | None:
    param = "session.audio.input.noise_reduction"
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in NOISE_REDUCTION_TYPES:
        raise UpdateError(param, f"{param} must be null or an object with \"type\": near_field or far_field")
    raise UpdateError(param, f"{param} is not supported: no noise reduction runs here; send null or leave it out")
