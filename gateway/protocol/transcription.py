"""The form of the OpenAI-compatible ``POST /v1/audio/transcriptions``: every
field OpenAI defines is honoured or refused by name, and a field it does not
define is refused too (as OpenAI refuses it).

Honoured: ``file``, ``model`` (the recognizer's own name, or one of OpenAI's
transcription models, all run by this server's recognizer), ``language``,
``response_format`` (json, text, verbose_json, srt, vtt), ``temperature`` 0
(the recognizer always decodes without sampling), ``timestamp_granularities[]``
(word, segment; with verbose_json), ``stream`` false, ``chunking_strategy`` auto
(the server always cuts the file at the pauses its voice detector finds),
``prompt`` and ``keywords[]`` (the decoder's context for every window;
gateway/protocol/vocabulary.py validates them).
Refused: ``include[]``, ``languages[]``,
``known_speaker_names[]``, ``known_speaker_references[]``, ``stream`` true,
``chunking_strategy`` objects, ``diarized_json``, the diarizing model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from starlette.datastructures import FormData

from engines.asr.prompt_text import term_list_text
from gateway.errors import BadRequest
from gateway.protocol.query import FALSE_SPELLINGS, TRUE_SPELLINGS
from gateway.protocol.vocabulary import VocabularyError, parse_prompt, parse_terms

OPENAI_MODELS = ("whisper-1", "gpt-transcribe", "gpt-4o-transcribe", "gpt-4o-mini-transcribe",
                 "gpt-4o-mini-transcribe-2025-12-15")
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
GRANULARITIES = ("word", "segment")
FIELDS = ("file", "model", "language", "prompt", "keywords[]", "response_format", "temperature",
          "timestamp_granularities[]", "stream", "chunking_strategy", "include[]")
# OpenAI defines these; what this server would need to honour them, it has not
REFUSED = {
    "include[]": "logprobs are not produced here; leave include out",
    "languages[]": "send one language as language (or none, to detect it)",
    "known_speaker_names[]": "speakers are not told apart here (no diarization)",
    "known_speaker_references[]": "speakers are not told apart here (no diarization)",
}


@dataclass(frozen=True)
class TranscriptionRequest:
    """The form's fields other than the file."""

    language: str | None = None  # None: detected
    response_format: str = "json"
    granularities: tuple[str, ...] = ()
    prompt: str = ""  # the decoder's context: ``prompt``, then the ``keywords[]`` as a term list
    terms: tuple[str, ...] = ()  # the ``keywords[]``: the transcript writes their near misses so

    @property
    def words(self) -> bool:
        return "word" in self.granularities

    @classmethod
    def from_form(cls, form: FormData, asr_model: str) -> TranscriptionRequest:
        """Raises ``BadRequest`` naming the field and why."""
        _refuse_fields(form)
        _check_model(_text(form, "model"), asr_model)
        response_format = _text(form, "response_format") or "json"
        if response_format not in RESPONSE_FORMATS:
            why = " (speakers are not told apart here)" if response_format == "diarized_json" else ""
            raise BadRequest(f"response_format: {response_format[:20]!r} is not supported{why}; use one of: "
                             f"{', '.join(RESPONSE_FORMATS)}")
        _check_temperature(_text(form, "temperature"))
        _check_stream(_text(form, "stream"))
        strategy = _text(form, "chunking_strategy")
        if strategy not in (None, "auto"):
            raise BadRequest("chunking_strategy: only \"auto\" is supported (the file is cut at the pauses the "
                             "server's voice detector finds)")
        granularities = _granularities(form.getlist("timestamp_granularities[]") +
                                       form.getlist("timestamp_granularities"), response_format)
        language = (_text(form, "language") or "").strip().lower() or None
        prompt, terms = _vocabulary(form)
        return cls(language=None if language == "auto" else language, response_format=response_format,
                   granularities=granularities, prompt=prompt, terms=terms)


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name}: must be a text field, not a file")
    return value


def _vocabulary(form: FormData) -> tuple[str, tuple[str, ...]]:
    """``prompt`` and ``keywords[]`` as the decoder's one context text, and the keywords."""
    try:
        prompt = parse_prompt(_text(form, "prompt") or "", "prompt")
        keywords = parse_terms(form.getlist("keywords[]"), "keywords[]")
    except VocabularyError as exc:
        raise BadRequest(str(exc)) from None
    return " ".join(p for p in (prompt, term_list_text(keywords)) if p), keywords


def _refuse_fields(form: FormData) -> None:
    for name in sorted(set(form.keys())):
        if name in REFUSED:
            raise BadRequest(f"{name}: not supported; {REFUSED[name]}")
        if name not in FIELDS and name != "timestamp_granularities":
            raise BadRequest(f"{name[:40]}: not a field of this request; the fields are: {', '.join(FIELDS)}")


def _check_model(model: str | None, asr_model: str) -> None:
    if model is None or model == asr_model or model in OPENAI_MODELS:
        return
    raise BadRequest(f"model: {model[:60]!r} is not a model here; use {asr_model!r} or one of OpenAI's "
                     f"({', '.join(OPENAI_MODELS)}), all transcribed by this server's {asr_model}")


def _check_temperature(raw: str | None) -> None:
    if raw is None or raw.strip() == "":
        return
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"temperature: {raw[:20]!r} is not a number") from None
    if value != 0:
        raise BadRequest(f"temperature: {value:g} is not supported; the recognizer here decodes without "
                         "sampling (temperature 0)")


def _check_stream(raw: str | None) -> None:
    if raw is None or raw.lower() in FALSE_SPELLINGS:
        return
    if raw.lower() in TRUE_SPELLINGS:
        raise BadRequest("stream: a streamed transcription of a file is not served here; use stream=false, "
                         "or the /v1/dictation socket for live text")
    raise BadRequest(f"stream: {raw[:20]!r} is not a boolean (use true or false)")


def _granularities(values: Sequence[object], response_format: str) -> tuple[str, ...]:
    wanted = tuple(str(v) for v in values)
    for value in wanted:
        if value not in GRANULARITIES:
            raise BadRequest(f"timestamp_granularities[]: {value[:20]!r} is not one of: {', '.join(GRANULARITIES)}")
    if wanted and response_format != "verbose_json":
        raise BadRequest("timestamp_granularities[]: timestamps come only with response_format=verbose_json")
    return wanted


def subtitles(segments: Sequence[dict[str, object]], *, vtt: bool) -> str:
    """The segments as SRT (``vtt`` False) or WebVTT cues, one per segment."""
    cues = []
    for number, segment in enumerate(segments, 1):
        span = f"{_clock(segment['start'], vtt)} --> {_clock(segment['end'], vtt)}"
        text = str(segment["text"]).strip()
        cues.append(f"{span}\n{text}\n" if vtt else f"{number}\n{span}\n{text}\n")
    return ("WEBVTT\n\n" if vtt else "") + "\n".join(cues)


def _clock(seconds: object, vtt: bool) -> str:
    millis = round(float(seconds) * 1000) if isinstance(seconds, (int, float)) else 0
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{'.' if vtt else ','}{millis:03d}"
