"""Messages of the /v1/tts socket: parsing of client messages and query
parameters, and the server events.

Exchange grammar (one socket)::

    server: ready
    client: (speak | text | flush | cancel | keepalive | ack)* end?
    server: per utterance: start, binary frame*, end   (or cancelled after a cancel)
            flushed after the last audio queued before a flush that has an id
            error* at any point (the session goes on)
            closed after the client's end, then close 1000
    resumable=true: every message after ready is numbered (events carry ``seq``,
    a binary frame is one more than the message before it); ``ack`` releases
    the kept ones (gateway/tts/resumable.py)

Parsing is strict about the fields it uses (type, range, length) and ignores
unknown fields. Every failure is a ``GatewayError`` whose message names the
field and says why, so the route only has to translate it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.codecs.formats import SOCKET_OUTPUTS, OutputFormat, parse_output_format
from gateway.errors import BadMessage, BadRequest, GatewayError
from gateway.protocol.common import End, Keepalive
from gateway.protocol.json import message_type, parse_message, unknown_type
from gateway.protocol.query import query_bool, query_rate, refuse_unknown_params
from gateway.protocol.wire import OMIT_NONE, WireMessage, rounded

MAX_ID_CHARS = 128
MAX_VOICE_CHARS = 128
MAX_SEED = 2**32 - 1
MAX_LANGUAGE_CHARS = 32
MAX_INSTRUCT_CHARS = 500


def engine_options(language: str | None, instruct: str | None) -> dict[str, str]:
    """``SynthesisOptions.extra`` for the per-utterance options a request named;
    an engine with no use for them ignores them."""
    return {k: v for k, v in (("language", language), ("instruct", instruct)) if v is not None}


@dataclass(frozen=True)
class TextLimits:
    """How much text one message and one utterance may carry (characters)."""

    max_chars: int = 2000

    @property
    def max_message_bytes(self) -> int:
        # UTF-8 takes at most 4 bytes a character, JSON escapes aside; beyond this a
        # message cannot be valid, so the socket closes 1009 without parsing it.
        return 4 * self.max_chars + 4096


# ---- client -> server


@dataclass(frozen=True)
class Speak:
    text: str
    id: str | None = None
    voice: str | None = None
    seed: int | None = None
    language: str | None = None  # engines that speak several languages (OmniVoice)
    instruct: str | None = None  # a voice description, for engines that design voices (OmniVoice)
    type: Literal["speak"] = "speak"

    def engine_options(self) -> dict[str, str]:
        return engine_options(self.language, self.instruct)


@dataclass(frozen=True)
class TextFragment:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True)
class Flush:
    id: str | None = None  # answered by a ``flushed`` event with this id once its audio is sent
    type: Literal["flush"] = "flush"


@dataclass(frozen=True)
class Cancel:
    # how much of the session's audio the client played (ms from the session's start, rebased by each
    # cancel that names it); answered with the text heard (docs/protocol.md)
    played_ms: int | None = None
    type: Literal["cancel"] = "cancel"


@dataclass(frozen=True)
class Ack:
    seq: int  # every message up to this number arrived (a resumable session drops them)
    type: Literal["ack"] = "ack"


ClientMessage = Speak | TextFragment | Flush | Cancel | End | Keepalive | Ack
CLIENT_TYPES = ("speak", "text", "flush", "cancel", "end", "keepalive", "ack")
MAX_SEQ = 2**53  # a JSON number every client reads exactly


def text_too_long(field: str, length: int, limits: TextLimits) -> BadMessage:
    return BadMessage(f"{field} has {length} characters; the limit is {limits.max_chars} "
                      f"(split it into several messages)", code="text_too_long")


def parse_client_message(raw: str | bytes, limits: TextLimits) -> ClientMessage:
    """Parse one JSON text message. Raises ``BadMessage`` (code ``bad_message`` or
    ``text_too_long``) with a message that names the field. A field the protocol
    does not define is ignored, as PROTOCOL.md says, so a newer client's message
    still works here; a defined field this server cannot honour (a ``seed`` for an
    engine that takes none) is refused where the engine is known."""
    data = parse_message(raw)
    kind = message_type(data)
    if kind == "speak":
        text = _text_field(data, "speak.text", limits, allow_blank=False)
        return Speak(text=text, id=_opt_str(data, "id", "speak.id", MAX_ID_CHARS),
                     voice=_opt_str(data, "voice", "speak.voice", MAX_VOICE_CHARS),
                     seed=seed_field(data, "speak.seed", BadMessage),
                     language=_opt_str(data, "language", "speak.language", MAX_LANGUAGE_CHARS),
                     instruct=_opt_str(data, "instruct", "speak.instruct", MAX_INSTRUCT_CHARS))
    if kind == "text":
        return TextFragment(text=_text_field(data, "text.text", limits, allow_blank=True))
    if kind == "flush":
        return Flush(id=_opt_str(data, "id", "flush.id", MAX_ID_CHARS))
    if kind == "cancel":
        return Cancel(played_ms=played_ms_field(data, "cancel.played_ms"))
    if kind == "end":
        return End()
    if kind == "keepalive":
        return Keepalive()
    if kind == "ack":
        return Ack(seq=_ack_seq(data))
    raise unknown_type(kind, CLIENT_TYPES)


def _ack_seq(data: dict[str, Any]) -> int:
    value = data.get("seq")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise BadMessage(f"ack.seq must be a whole number from 0 to {MAX_SEQ} (the seq of the last message "
                         f"received), got {str(value)[:40]!r}")
    return value


MAX_PLAYED_MS = 24 * 3600 * 1000


def played_ms_field(data: dict[str, Any], field: str) -> int | None:
    """A played position in whole milliseconds, or None when absent."""
    value = data.get("played_ms")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PLAYED_MS:
        raise BadMessage(f"{field} must be a whole number of milliseconds from 0 to {MAX_PLAYED_MS}, "
                         f"got {str(value)[:40]!r}")
    return value


def _text_field(data: dict[str, Any], field: str, limits: TextLimits, *, allow_blank: bool) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise BadMessage(f"{field} must be a string")
    if not allow_blank and not text.strip():
        raise BadMessage(f"{field} is empty")
    if len(text) > limits.max_chars:
        raise text_too_long(field, len(text), limits)
    return text


def _opt_str(data: dict[str, Any], key: str, field: str, max_chars: int) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadMessage(f"{field} must be a non-empty string")
    if len(value) > max_chars:
        raise BadMessage(f"{field} is longer than {max_chars} characters")
    return value


def seed_field(data: Mapping[str, Any], field: str, error: type[GatewayError]) -> int | None:
    """``data["seed"]``: None when absent or null, else an integer 0..``MAX_SEED``
    (a bool is not one); anything else raises ``error`` naming ``field``
    (``"speak.seed"`` on the socket, ``"seed"`` in an HTTP body)."""
    value = data.get("seed")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise error(f"{field}: must be an integer between 0 and {MAX_SEED}")
    return value


# ---- query parameters


@dataclass(frozen=True)
class TtsParams:
    engine: str
    voice: str | None
    sample_rate: int | None  # None: the encoding's default (G.711: 8 kHz; others: the engine's rate)
    encoding: OutputFormat
    resumable: bool = False  # ready carries a resume token; the session is held after a drop


QUERY_PARAMS = ("engine", "voice", "sample_rate", "encoding", "resumable")


def parse_tts_params(query: Mapping[str, str], default_engine: str) -> TtsParams:
    """Parse the /v1/tts query string. Raises ``BadRequest`` naming the parameter."""
    refuse_unknown_params(query, QUERY_PARAMS)
    engine = query.get("engine") or default_engine
    voice = query.get("voice") or None
    if voice is not None and len(voice) > MAX_VOICE_CHARS:
        raise BadRequest(f"voice: longer than {MAX_VOICE_CHARS} characters")
    try:
        encoding = parse_output_format(query.get("encoding") or OutputFormat.PCM_S16LE.value, SOCKET_OUTPUTS)
    except ValueError as exc:
        raise BadRequest(f"encoding: {query['encoding'][:20]!r} {exc}") from None
    return TtsParams(engine=engine, voice=voice, sample_rate=query_rate(query, encoding, None), encoding=encoding,
                     resumable=query_bool(query, "resumable", False))


# ---- server -> client


@dataclass(frozen=True, kw_only=True)
class Ready(WireMessage):
    protocol: int = 1
    session: str
    engine: str
    voice: str | None
    sample_rate: int
    encoding: str
    frame_samples: int
    type: Literal["ready"] = "ready"


@dataclass(frozen=True)
class Start(WireMessage):
    id: str
    text: str
    type: Literal["start"] = "start"


@dataclass(frozen=True)
class UtteranceEnd(WireMessage):
    id: str
    frames: int
    audio_s: float = field(metadata=rounded(3))
    ttfa_ms: float | None = field(metadata=rounded(1))
    rtf: float | None = field(metadata=rounded(3))
    type: Literal["end"] = "end"


@dataclass(frozen=True)
class Flushed(WireMessage):
    """Every utterance queued before the ``flush`` that asked for it has been sent."""

    id: str
    type: Literal["flushed"] = "flushed"


@dataclass(frozen=True)
class Cancelled(WireMessage):
    """``id``: the utterance played at ``played_ms`` when the cancel named it (its text is
    ``text_spoken + text_remaining``), else the first one cancelled."""

    id: str | None
    frames_sent: int
    played_ms: int | None = field(default=None, metadata=OMIT_NONE)
    text_spoken: str | None = field(default=None, metadata=OMIT_NONE)
    text_remaining: str | None = field(default=None, metadata=OMIT_NONE)
    type: Literal["cancelled"] = "cancelled"
