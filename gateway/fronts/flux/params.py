"""``/v2/listen``'s query parameters and turn thresholds, mapped onto the
gateway's own dictation parameters.

The end of a turn here is a silence rule (the recognizer's VAD), not a model's
confidence. ``end_of_turn_confidence`` is the silence heard after the turn's
speech over ``REFERENCE_SILENCE_MS`` (capped at 1), so a threshold is a
silence: ``eot_threshold`` t ends a turn after t x 500 ms of silence (0.7, the
default: 350 ms), and ``eot_threshold=1.0`` turns that rule off, so a turn ends
by ``ForceEndTurn`` or after ``eot_timeout_ms`` of silence, as at Flux.
``eager_eot_threshold`` switches eager ends of turn on; the eager point is the
recognizer's own (its speculative final, after 160 ms of silence or half the
turn's silence if that is shorter), whatever the value. ``keyterm`` (repeatable)
is the stream's custom vocabulary (gateway/protocol/vocabulary.py: the same
limits and messages as every front's terms).

Every parameter the SDK sends is honoured, refused naming it and why, or
(``mip_opt_out``, ``tag``) accepted with its meaning here documented. A name
Flux does not define is refused too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from engines.asr.prompt_text import term_list_text
from gateway.audio import parse_rate
from gateway.errors import BadRequest
from gateway.fronts.deepgram.params import INPUT_ENCODINGS
from gateway.protocol.dictation import MAX_SILENCE_MS, MIN_SILENCE_MS, DictationParams
from gateway.protocol.query import query_bool, query_list, refuse_unknown_params
from gateway.protocol.vocabulary import VocabularyError, parse_terms

REFERENCE_SILENCE_MS = 500  # the silence that end_of_turn_confidence 1.0 stands for
DEFAULT_EOT_THRESHOLD = 0.7  # Flux's defaults
DEFAULT_EOT_TIMEOUT_MS = 5000
EOT_THRESHOLD_RANGE = (0.5, 1.0)  # Flux's ranges
EAGER_EOT_THRESHOLD_RANGE = (0.3, 0.9)
EOT_TIMEOUT_MS_RANGE = (500, MAX_SILENCE_MS)  # Flux goes to 60000; the recognizer's silence rule to 5000
MODELS = {"flux-general-en": "en", "flux-general-multi": "auto"}
FLUX_PARAMS = ("model", "encoding", "sample_rate", "eager_eot_threshold", "eot_threshold", "eot_timeout_ms",
               "keyterm", "language_hint", "profanity_filter", "numerals", "redact", "mip_opt_out", "tag")
# the recognizer sidecar is given one language or detects one among all it knows; it takes no short list
LANGUAGE_HINTS_REFUSED = ("the recognizer is told one language (flux-general-en: English) or detects it among "
                          "all it knows (flux-general-multi), and cannot be held to a list of hints")
# Flux parameters refused whenever they are given: why
REFUSED = {
    "language_hint": LANGUAGE_HINTS_REFUSED,
    "redact": "no redaction runs here",
}
# Flux booleans whose one value is what the recognizer always does: (that value, why the other is refused)
FIXED = {
    "profanity_filter": (False, "no profanity filter runs here"),
    "numerals": (False, "numbers are written the way the recognizer writes them"),
}


@dataclass(frozen=True)
class Thresholds:
    """A stream's end-of-turn rule, in Flux's terms."""

    eot_threshold: float = DEFAULT_EOT_THRESHOLD
    eot_timeout_ms: int = DEFAULT_EOT_TIMEOUT_MS
    eager_eot_threshold: float | None = None  # None: no EagerEndOfTurn / TurnResumed

    @property
    def manual(self) -> bool:
        """True when turns end only by ``ForceEndTurn`` or ``eot_timeout_ms``."""
        return self.eot_threshold >= 1.0

    @property
    def silence_ms(self) -> int:
        """The silence after speech that ends a turn."""
        if self.manual:
            return self.eot_timeout_ms
        return max(MIN_SILENCE_MS, round(self.eot_threshold * REFERENCE_SILENCE_MS))

    def to_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {}
        if self.eager_eot_threshold is not None:
            out["eager_eot_threshold"] = self.eager_eot_threshold
        out["eot_threshold"] = self.eot_threshold
        out["eot_timeout_ms"] = self.eot_timeout_ms
        return out

    def checked(self) -> Thresholds:
        """Itself, or ``BadRequest`` naming the threshold out of Flux's order."""
        eager = self.eager_eot_threshold
        if eager is not None and not self.manual and eager > self.eot_threshold:
            raise BadRequest(f"eager_eot_threshold: {eager} must not exceed eot_threshold ({self.eot_threshold})")
        return self


@dataclass(frozen=True)
class FluxParams:
    encoding: str  # linear16, mulaw or alaw: what the client sends
    sample_rate: int
    model: str
    thresholds: Thresholds
    keyterms: tuple[str, ...] = ()  # the stream's custom vocabulary

    @property
    def language(self) -> str:
        return MODELS[self.model]

    @property
    def dictation(self) -> DictationParams:
        """What the shared session runs with (no word timestamps: gateway/fronts/flux/turns.py says why)."""
        t = self.thresholds
        return DictationParams(sample_rate=self.sample_rate, encoding=INPUT_ENCODINGS[self.encoding],
                               language=self.language, interim=True, word_timestamps=False,
                               silence_ms=t.silence_ms, eager=t.eager_eot_threshold is not None,
                               prompt=term_list_text(self.keyterms), terms=self.keyterms)

    def session_params(self, turn_model: bool) -> DictationParams:
        """``dictation``, with the end-of-turn model on when the recognizer has one and the
        confidence rule is on: a pause the model hears as finished (at least ``eot_threshold``
        sure) ends the turn at the eager point, and the silence rule ends the rest."""
        if not turn_model or self.thresholds.manual:
            return self.dictation
        return replace(self.dictation, turn_threshold=self.thresholds.eot_threshold)


def number(name: str, raw: object, low: float, high: float) -> float:
    """``raw`` (a query string or a JSON number) as a float in ``low``..``high``."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise BadRequest(f"{name}: must be a number between {low} and {high}")
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name}: {str(raw)[:20]!r} is not a number") from None
    except OverflowError:  # a JSON integer past a float's range
        value = math.inf
    if not math.isfinite(value) or not low <= value <= high:
        raise BadRequest(f"{name}: {value:g} is out of range; use {low:g} to {high:g}")
    return value


def timeout_ms(raw: object) -> int:
    low, high = EOT_TIMEOUT_MS_RANGE
    value = number("eot_timeout_ms", raw, low, 60000)
    if value != int(value):
        raise BadRequest(f"eot_timeout_ms: {value:g} is not a whole number of milliseconds")
    if value > high:
        raise BadRequest(f"eot_timeout_ms: {value:g} is not supported; this server ends a turn after at most "
                         f"{high} ms of silence (use {low} to {high})")
    return int(value)


def parse_flux_params(query: Mapping[str, str]) -> FluxParams:
    """Parse ``/v2/listen``'s query. Raises ``BadRequest`` naming the parameter."""
    refuse_unknown_params(query, FLUX_PARAMS)
    for name, why in REFUSED.items():
        if name in query:
            raise BadRequest(f"{name}: not supported; {why}")
    for name, (value, why) in FIXED.items():
        if query_bool(query, name, value) != value:
            raise BadRequest(f"{name}={str(not value).lower()}: not supported; {why}")
    query_bool(query, "mip_opt_out", False)
    model = query.get("model") or ""
    if model not in MODELS:
        raise BadRequest(f"model: {model[:40]!r} is not served here; use one of: {', '.join(MODELS)}")
    encoding = (query.get("encoding") or "linear16").lower()
    if encoding not in INPUT_ENCODINGS:
        raise BadRequest(f"encoding: {encoding[:20]!r} is not supported; use linear16, mulaw or alaw")
    raw_rate = query.get("sample_rate")
    if not raw_rate:
        raise BadRequest("sample_rate: required for raw audio (linear16, mulaw, alaw); give the audio's rate in Hz")
    try:
        rate = parse_rate(raw_rate)
    except ValueError as exc:
        raise BadRequest(f"sample_rate: {raw_rate[:20]!r} {exc}") from None
    thresholds = Thresholds()
    if query.get("eot_threshold"):
        thresholds = replace(thresholds, eot_threshold=number("eot_threshold", query["eot_threshold"],
                                                              *EOT_THRESHOLD_RANGE))
    if query.get("eot_timeout_ms"):
        thresholds = replace(thresholds, eot_timeout_ms=timeout_ms(query["eot_timeout_ms"]))
    if query.get("eager_eot_threshold"):
        thresholds = replace(thresholds, eager_eot_threshold=number(
            "eager_eot_threshold", query["eager_eot_threshold"], *EAGER_EOT_THRESHOLD_RANGE))
    try:
        keyterms = parse_terms(query_list(query, "keyterm"), "keyterm")
    except VocabularyError as exc:
        raise BadRequest(str(exc)) from None
    return FluxParams(encoding=encoding, sample_rate=rate, model=model, thresholds=thresholds.checked(),
                      keyterms=keyterms)
