"""Messages of the /v1/dictation socket: query parameters, client messages,
server events.

Exchange grammar (one socket)::

    server: ready
    client: (binary audio | finalize | config | keepalive)* end?
    server: per utterance n: speech_started, (partial | eager_final turn_resumed)*,
            eager_final?, then final, or discarded when the utterance held no
            words and was not finalized (eager_final and turn_resumed only
            with eager=true)
            finalized after the finals of the audio before a finalize that has an id
            error* at any point (the session goes on)
            closed after the client's end, then close 1000


``partial.text`` is the whole current hypothesis of the utterance, never a
delta; ``partial.stable`` only grows within an utterance and ``text`` starts
with it. Exactly one ``final`` per utterance, in order, never followed by a
partial of the same utterance.

``eager_final`` is the speculative final, sent as soon as it is decoded after
speech stops; ``turn_resumed`` withdraws it (speech came back). A ``final``
that follows an ``eager_final`` with no ``turn_resumed`` between them has the
same text; no ``partial`` comes between an ``eager_final`` and what follows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engines.asr.prompt_text import term_list_text
from gateway.codecs.formats import InputEncoding, parse_input_encoding
from gateway.errors import BadMessage, BadRequest
from gateway.protocol.common import Closed, End, ErrorEvent, Keepalive
from gateway.protocol.json import message_type, parse_message, unknown_type
from gateway.protocol.query import query_bool, query_int, query_list, query_rate, refuse_unknown_params
from gateway.protocol.vocabulary import VocabularyError, parse_terms
from gateway.protocol.wire import OMIT_NONE, WireMessage, internal

MIN_SILENCE_MS = 200
MAX_SILENCE_MS = 5000
DEFAULT_SILENCE_MS = 500
MAX_TEXT_MESSAGE_BYTES = 64 * 1024
MAX_ID_CHARS = 128
MAX_AUDIO_MESSAGE_BYTES = 1024 * 1024  # ~5 s at 48 kHz f32, ~32 s at 16 kHz s16
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")


# ---- query parameters


@dataclass(frozen=True)
class DictationParams:
    sample_rate: int = 16000  # PCM and G.711: the audio's rate; ``opus``: the device's; containers: ignored
    encoding: InputEncoding = InputEncoding.PCM_S16LE
    language: str = "auto"
    interim: bool = True
    word_timestamps: bool = False
    silence_ms: int = DEFAULT_SILENCE_MS
    eager: bool = False
    prompt: str = ""  # the decoder's context: the client's terms (gateway/protocol/vocabulary.py)
    terms: tuple[str, ...] = ()  # the client's spelling of its terms: a final's near misses are written so
    resumable: bool = False  # ready carries a resume token; the session is held after a drop
    turn_threshold: float | None = None  # a front's (Flux): end a turn when the turn model is this sure


QUERY_PARAMS = ("sample_rate", "encoding", "language", "interim", "word_timestamps", "silence_ms", "eager", "terms",
                "resumable")


def parse_dictation_params(query: Mapping[str, str]) -> DictationParams:
    """Parse the /v1/dictation query string. Raises ``BadRequest`` naming the parameter."""
    refuse_unknown_params(query, QUERY_PARAMS)
    try:
        encoding = parse_input_encoding(query.get("encoding") or InputEncoding.PCM_S16LE.value)
    except ValueError as exc:
        raise BadRequest(f"encoding: {query['encoding'][:20]!r} {exc}") from None
    rate = query_rate(query, encoding, encoding.default_rate)
    language = (query.get("language") or "auto").lower()
    if language != "auto" and not _LANGUAGE.match(language):
        raise BadRequest(f"language: {language[:20]!r} is not a language code "
                         "(two or three letters, such as 'en') or 'auto'")
    silence_ms = query_int(query, "silence_ms", MIN_SILENCE_MS, MAX_SILENCE_MS)
    try:  # comma-separated, and the parameter may be repeated
        terms = parse_terms([t for v in query_list(query, "terms") for t in v.split(",")], "terms")
    except VocabularyError as exc:
        raise BadRequest(str(exc)) from None
    return DictationParams(sample_rate=rate, encoding=encoding, language=language,
                           interim=query_bool(query, "interim", True),
                           word_timestamps=query_bool(query, "word_timestamps", False),
                           silence_ms=DEFAULT_SILENCE_MS if silence_ms is None else silence_ms,
                           eager=query_bool(query, "eager", False),
                           prompt=term_list_text(terms), terms=terms, resumable=query_bool(query, "resumable", False))


# ---- resuming a dropped session (gateway/resume_tokens.py)

RESUME_PARAMS = ("resume", "last_seq")
MAX_TOKEN_CHARS = 128
_TOKEN = re.compile(r"^[A-Za-z0-9_.-]+$")  # URL-safe base64, and the replica prefix's "."


@dataclass(frozen=True)
class ResumeRequest:
    """``?resume=<token>&last_seq=N``: continue a held session after the event numbered N."""

    token: str = field(repr=False)
    last_seq: int


def parse_resume_request(query: Mapping[str, str]) -> ResumeRequest:
    """Parse a resume's query; the session keeps the parameters it was opened
    with, so no other parameter is taken. Raises ``BadRequest`` naming the parameter."""
    refuse_unknown_params(query, RESUME_PARAMS)
    token = query.get("resume", "")
    if not 0 < len(token) <= MAX_TOKEN_CHARS or not _TOKEN.match(token):
        raise BadRequest(f"resume: not a resume token (1..{MAX_TOKEN_CHARS} URL-safe characters); "
                         "send the resume_token of the latest ready")
    last_seq = query_int(query, "last_seq")
    if last_seq is None:
        raise BadRequest("last_seq: missing; send the seq of the last event you received (0: none)")
    return ResumeRequest(token, last_seq)


# ---- client -> server


@dataclass(frozen=True)
class Finalize:
    id: str | None = None  # answered by a ``finalized`` event with this id
    type: Literal["finalize"] = "finalize"


@dataclass(frozen=True)
class Config:
    """The stream's new vocabulary, from the next decode on: ``prompt`` is the
    decoder's context (the client's terms as a list; "" clears them; None keeps
    them). ``reset_context``: the next decodes forget the stream's earlier
    finals (a new topic, another speaker). ``terms``: the client's spelling of
    its terms, with a new ``prompt`` (engines/asr/term_spelling.py). A front
    whose vendor changes its prompt or terms mid-stream sends one too."""

    prompt: str | None = ""
    reset_context: bool = False
    terms: tuple[str, ...] = ()
    type: Literal["config"] = "config"


ClientMessage = Finalize | Config | End | Keepalive
CLIENT_TYPES = ("finalize", "config", "end", "keepalive")


def parse_client_message(raw: str) -> ClientMessage:
    """Parse one JSON text message; raises ``BadMessage`` saying what is wrong. A
    field the protocol does not define is ignored (PROTOCOL.md), an unknown type is not."""
    data = parse_message(raw)
    kind = message_type(data)
    if kind == "finalize":
        mark = data.get("id")
        if mark is not None and (not isinstance(mark, str) or not 0 < len(mark) <= MAX_ID_CHARS):
            raise BadMessage(f"finalize.id must be a string of 1..{MAX_ID_CHARS} characters")
        return Finalize(id=mark)
    if kind == "config":
        return _config(data)
    if kind == "end":
        return End()
    if kind == "keepalive":
        return Keepalive()
    raise unknown_type(kind, CLIENT_TYPES)


def _config(data: dict[str, Any]) -> Config:
    reset = data.get("reset_context", False)
    if not isinstance(reset, bool):
        raise BadMessage("config.reset_context must be true or false")
    if "terms" not in data:
        if reset:
            return Config(None, reset_context=True)
        raise BadMessage("config: give terms (a list of strings; [] clears them) or reset_context: true")
    terms = data["terms"]
    if not isinstance(terms, list):
        raise BadMessage("config.terms must be a list of strings")
    try:
        parsed = parse_terms(terms, "config.terms")
        return Config(term_list_text(parsed), reset_context=reset, terms=parsed)
    except VocabularyError as exc:
        raise BadMessage(str(exc)) from None


# ---- server -> client


@dataclass(frozen=True, kw_only=True)
class Ready(WireMessage):
    session: str
    protocol: int = 1
    sample_rate: int
    encoding: str
    language: str
    model: str
    type: Literal["ready"] = "ready"


@dataclass(frozen=True)
class SpeechStarted(WireMessage):
    utterance: int
    at: float
    start_sample: int = internal(0, compare=False)  # where its audio starts (at ASR_RATE)
    type: Literal["speech_started"] = "speech_started"


@dataclass(frozen=True)
class Partial(WireMessage):
    utterance: int
    text: str
    stable: str
    start: float
    end: float
    lag_s: float = 0.0
    type: Literal["partial"] = "partial"


@dataclass(frozen=True)
class Final(WireMessage):
    utterance: int
    text: str
    start: float
    end: float
    language: str
    words: list[dict[str, Any]] | None = field(default=None, metadata=OMIT_NONE)
    lag_s: float = internal(0.0, compare=False)  # how far the recognizer was behind
    end_sample: int = internal(0, compare=False)  # where its audio ends (at ASR_RATE)
    endpoint: bool = internal(False, compare=False)  # closed by the pause that ends a turn, not a request
    # the utterance's own decode where the words committed by partials overrode it (None: ``text`` is it)
    decoded: str | None = internal(None, compare=False)
    turn_confidence: float | None = internal(None, compare=False)  # the end-of-turn model's answer in its pause
    type: Literal["final"] = "final"


@dataclass(frozen=True)
class EagerFinal(WireMessage):
    """The utterance's final as it stands if the silence lasts; ``turn_resumed``
    withdraws it, otherwise the ``final`` repeats its text."""

    utterance: int
    text: str
    start: float
    end: float
    language: str
    words: list[dict[str, Any]] | None = field(default=None, metadata=OMIT_NONE)
    type: Literal["eager_final"] = "eager_final"


@dataclass(frozen=True)
class TurnResumed(WireMessage):
    """The last ``eager_final`` of the utterance no longer stands: speech came back at ``at``."""

    utterance: int
    at: float
    type: Literal["turn_resumed"] = "turn_resumed"


@dataclass(frozen=True)
class Finalized(WireMessage):
    """The answer to a ``finalize`` with an id: every final of the audio sent before
    it is out. ``utterance`` is the one it closed (None: none was open)."""

    id: str
    utterance: int | None
    type: Literal["finalized"] = "finalized"


@dataclass(frozen=True)
class Discarded(WireMessage):
    """The utterance held no words (a cough, a door): it ends without a ``final``."""

    utterance: int
    end_sample: int = internal(0, compare=False)  # where its audio ends (at ASR_RATE)
    type: Literal["discarded"] = "discarded"


# What the recognizer says about a stream's utterances.
TranscriptEvent = SpeechStarted | Partial | EagerFinal | TurnResumed | Final | Discarded | Finalized
# Every event a dictation session hands its transport; the transport turns it into its wire form.
ServerEvent = Ready | TranscriptEvent | Closed | ErrorEvent
