"""Query parameters of Deepgram's ``/v1/listen`` and ``/v1/speak``, mapped onto
the gateway's own session parameters.

Every parameter is honoured, refused naming it and why, or (``NO_EFFECT``: ones
the agent frameworks send on every socket, whose meaning here is documented)
accepted with either value. A Deepgram boolean whose one value is what the
recognizer always does (``punctuate=true``, ``smart_format=false``, ...:
``FIXED``) is accepted at that value and refused at the other. A parameter
Deepgram does not define is refused too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engines.asr.prompt_text import term_list_text
from gateway.audio import parse_rate
from gateway.codecs.formats import InputEncoding, OutputFormat
from gateway.errors import BadRequest
from gateway.protocol.dictation import MAX_SILENCE_MS, MIN_SILENCE_MS, DictationParams
from gateway.protocol.query import query_bool, query_int, query_list, refuse_unknown_params
from gateway.protocol.vocabulary import VocabularyError, parse_terms

ENCODINGS = ("linear16", "mulaw", "alaw")
G711_RATE = 8000
# Deepgram's encoding names onto the codec layer's, in and out.
INPUT_ENCODINGS = {"linear16": InputEncoding.PCM_S16LE, "mulaw": InputEncoding.MULAW, "alaw": InputEncoding.ALAW}
OUTPUT_FORMATS = {"linear16": OutputFormat.PCM_S16LE, "mulaw": OutputFormat.MULAW, "alaw": OutputFormat.ALAW}
DEFAULT_SILENCE_MS = 500  # the native default; Deepgram's 10 ms is below what the VAD can tell

# /v1/listen booleans whose one value is what the recognizer always does: (that value, why the other is refused)
FIXED = {
    "punctuate": (True, "the recognizer always punctuates and capitalises"),
    "smart_format": (False, "no formatting pass runs after the recognizer"),
    "diarize": (False, "speakers are not told apart here"),
    "numerals": (False, "numbers are written the way the recognizer writes them"),
    "profanity_filter": (False, "no profanity filter runs here"),
    "detect_entities": (False, "no entity detection runs here"),
    "dictation": (False, "spoken punctuation commands are not converted here"),
    "multichannel": (False, "only one channel is transcribed"),
}
# /v1/listen parameters accepted with any value, and what they mean here (LiveKit and
# Pipecat send them on every socket)
NO_EFFECT = {
    "filler_words": "fillers (uh, um) appear when the recognizer writes them, which it often does not",
    "no_delay": "finals are never held back for formatting, so there is nothing to hurry",
    "mip_opt_out": "this server keeps no audio or text to improve a model",
    "tag": "usage labels; this server keeps no usage reports",
}
# /v1/listen parameters refused whenever they are given
LISTEN_REFUSED = {
    "search": "no search runs over the audio here",
    "replace": "no replacement runs over the transcript here",
    "redact": "no redaction runs here",
    "callback": "results go back over this socket only",
    "callback_method": "results go back over this socket only",
    "extra": "results carry no extra metadata here",
    "diarize_model": "speakers are not told apart here",
    "language_hint": "send the language as language",
    "alternatives": "one transcript is sent per result",
}
LISTEN_PARAMS = ("encoding", "sample_rate", "channels", "language", "detect_language", "model", "interim_results",
                 "endpointing", "utterance_end_ms", "vad_events", "version", "keyterm", "keywords", *FIXED, *NO_EFFECT,
                 *LISTEN_REFUSED)
SPEAK_PARAMS = ("encoding", "sample_rate", "container", "model", "speed", "bit_rate", "mip_opt_out")
# Deepgram's model families: a listen model of one is run by this server's recognizer; a speak
# model of one (an Aura voice) speaks with the engine's default voice
LISTEN_MODEL_FAMILIES = ("nova", "enhanced", "base", "whisper")
SPEAK_MODEL_FAMILIES = ("aura",)


def check_model(model: str, served: list[str], families: tuple[str, ...]) -> None:
    """``BadRequest`` unless ``model`` is empty, one of ``served`` or of a Deepgram family."""
    if not model or model in served or model.split("-")[0] in families:
        return
    names = ", ".join([*served, *(f"{family}-*" for family in families)])
    raise BadRequest(f"model: {model[:40]!r} is not served here; use one of: {names}")


@dataclass(frozen=True)
class ListenParams:
    encoding: str  # one of ENCODINGS: what the client sends
    sample_rate: int
    model: str
    language: str  # as the client asked, for the Metadata
    interim_results: bool
    endpointing: bool  # False: finals never carry speech_final
    utterance_end_ms: int | None
    vad_events: bool
    dictation: DictationParams  # what the shared session runs with (always 16-bit PCM)


@dataclass(frozen=True)
class SpeakParams:
    encoding: str  # one of ENCODINGS: what the client gets
    sample_rate: int
    model: str




def _encoding(query: Mapping[str, str]) -> str:
    encoding = (query.get("encoding") or "linear16").lower()
    if encoding not in ENCODINGS:
        raise BadRequest(f"encoding: {encoding[:20]!r} is not supported; use linear16, mulaw or alaw "
                         "(this gateway decodes no containers or compressed audio)")
    return encoding


def _rate(query: Mapping[str, str], default: int) -> int:
    raw = query.get("sample_rate")
    if not raw:
        return default
    try:
        return parse_rate(raw)
    except ValueError as exc:
        raise BadRequest(f"sample_rate: {raw[:20]!r} {exc}") from None


def _language(raw: str) -> str:
    """Deepgram's BCP-47 tag (``en-US``) as the ISO 639-1 code the ASR takes; ``multi`` detects."""
    low = raw.strip().lower()
    if low in ("", "multi", "auto"):
        return "auto"
    base = low.split("-", 1)[0]
    if not (2 <= len(base) <= 3 and base.isalpha()):
        raise BadRequest(f"language: {raw[:20]!r} is not a BCP-47 language tag")
    return base


def parse_listen_params(query: Mapping[str, str]) -> ListenParams:
    """Parse ``/v1/listen``'s query. Raises ``BadRequest`` naming the parameter."""
    _check_listen_extras(query)
    encoding = _encoding(query)
    rate = _rate(query, G711_RATE if encoding != "linear16" else 16000)
    channels = query_int(query, "channels")
    if channels not in (None, 1):
        raise BadRequest(f"channels: {channels} is not supported; send mono audio (channels=1)")
    raw_endpointing = (query.get("endpointing") or "").lower()
    endpointing = raw_endpointing != "false"
    silence_ms = DEFAULT_SILENCE_MS
    if raw_endpointing not in ("", "true", "false"):
        value = query_int(query, "endpointing")
        assert value is not None
        silence_ms = min(max(value, MIN_SILENCE_MS), MAX_SILENCE_MS)
    utterance_end_ms = query_int(query, "utterance_end_ms")
    if utterance_end_ms is not None and not endpointing:
        # without endpointing, the utterance-end gap is the only silence rule the client asked for
        silence_ms = min(max(utterance_end_ms, MIN_SILENCE_MS), MAX_SILENCE_MS)
    interim = query_bool(query, "interim_results", False)
    language = query.get("language") or "en"
    if query_bool(query, "detect_language", False):
        language = "multi"
    dictation = DictationParams(sample_rate=rate, encoding=INPUT_ENCODINGS[encoding], language=_language(language),
                                interim=interim, word_timestamps=False, silence_ms=silence_ms,
                                prompt=term_list_text(terms := _terms(query)), terms=terms)
    return ListenParams(encoding=encoding, sample_rate=rate, model=(query.get("model") or "")[:64],
                        language=language[:20], interim_results=interim, endpointing=endpointing,
                        utterance_end_ms=utterance_end_ms, vad_events=query_bool(query, "vad_events", False),
                        dictation=dictation)


def _terms(query: Mapping[str, str]) -> tuple[str, ...]:
    """``keyterm`` (Nova-3: one phrase each) and ``keywords`` (older models: ``word`` or
    ``word:boost``), both repeatable, as one term list. Every term gets the same bias
    whatever its positive boost; a boost of 0 or below asks to suppress a word, which
    the recognizer cannot do, and is refused."""
    words = [_keyword(raw) for raw in query_list(query, "keywords")]
    try:
        return (parse_terms(query_list(query, "keyterm"), "keyterm")
                + parse_terms(words, "keywords"))
    except VocabularyError as exc:
        raise BadRequest(str(exc)) from None


def _keyword(raw: str) -> str:
    word, sep, boost = raw.rpartition(":")
    if not sep:
        return raw
    try:
        value = float(boost)
    except ValueError:
        return raw  # a colon inside the word (parse_terms checks it)
    if not value > 0:
        raise BadRequest(f"keywords: {raw[:60]!r} has boost {boost[:10]}; the recognizer here can favour a word "
                         "but not suppress it (use a positive boost, or leave the word out)")
    return word


def _check_listen_extras(query: Mapping[str, str]) -> None:
    """Refuse what ``/v1/listen`` cannot honour (``FIXED`` at its other value,
    ``LISTEN_REFUSED``, a version other than latest, names Deepgram lacks)."""
    refuse_unknown_params(query, LISTEN_PARAMS)
    for name, (value, why) in FIXED.items():
        if query_bool(query, name, value) != value:
            raise BadRequest(f"{name}={str(not value).lower()}: not supported; {why} "
                             f"(use {name}={str(value).lower()} or leave it out)")
    for name in NO_EFFECT:
        if name != "tag":
            query_bool(query, name, False)
    for name, why in LISTEN_REFUSED.items():
        if query.get(name):
            raise BadRequest(f"{name}: not supported; {why}")
    version = query.get("version")
    if version not in (None, "", "latest"):
        raise BadRequest(f"version: {version[:20]!r} is not served; the one version here is latest")


def parse_speak_params(query: Mapping[str, str]) -> SpeakParams:
    """Parse ``/v1/speak``'s query. Raises ``BadRequest`` naming the parameter."""
    refuse_unknown_params(query, SPEAK_PARAMS)
    query_bool(query, "mip_opt_out", False)
    if query.get("bit_rate"):
        raise BadRequest("bit_rate: not supported; only compressed audio has a bit rate, and this socket sends "
                         "linear16, mulaw or alaw")
    speed = query.get("speed")
    if speed:
        try:
            valid = float(speed) == 1.0
        except ValueError:
            valid = False
        if not valid:
            raise BadRequest(f"speed: {speed[:20]!r} is not supported; this server speaks at speed 1.0 only")
    encoding = _encoding(query)
    container = (query.get("container") or "none").lower()
    if container != "none":
        raise BadRequest(f"container: {container[:20]!r} is not supported on the socket; use container=none")
    rate = _rate(query, G711_RATE if encoding != "linear16" else 24000)
    return SpeakParams(encoding=encoding, sample_rate=rate, model=(query.get("model") or "")[:128])
