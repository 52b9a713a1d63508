"""Flux's ``Configure`` message: what a stream may change once it is open.

``keyterms`` replaces the stream's key terms (its custom vocabulary, checked by
gateway/protocol/vocabulary.py; an empty list clears them), from the
recognizer's next decode on. The recognizer's end-of-turn silence and its eager
finals are options of the stream, chosen when it opens, so a ``Configure`` is
honoured when it leaves them as they are (the same thresholds, another
``eager_eot_threshold`` while eager ends of turn are on, another
``eot_timeout_ms`` while the confidence rule ends turns first, no language
hints, no numerals or profanity filter) and refused otherwise, with a
``ConfigureFailure`` whose code says which: ``INVALID_CONFIGURE`` (a field Flux
does not define, a value out of range, a key term past a limit) or
``UNSUPPORTED_CONFIGURE`` (a change this server cannot make). A refused
``Configure`` changes nothing, not even its valid fields; the stream goes on
either way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway.errors import BadRequest
from gateway.fronts.flux.params import (
    EAGER_EOT_THRESHOLD_RANGE,
    EOT_THRESHOLD_RANGE,
    LANGUAGE_HINTS_REFUSED,
    Thresholds,
    number,
    timeout_ms,
)
from gateway.protocol.vocabulary import VocabularyError, parse_terms

CONFIGURE_FIELDS = ("thresholds", "keyterms", "language_hints", "numerals", "profanity_filter")
THRESHOLD_FIELDS = ("eager_eot_threshold", "eot_threshold", "eot_timeout_ms")
INVALID = "INVALID_CONFIGURE"
UNSUPPORTED = "UNSUPPORTED_CONFIGURE"


class ConfigureRefused(Exception):
    def __init__(self, code: str, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


@dataclass(frozen=True)
class StreamConfig:
    """What a ``Configure`` may change: the end-of-turn rule and the key terms."""

    thresholds: Thresholds
    keyterms: tuple[str, ...] = ()


def apply_configure(data: dict[str, Any], current: StreamConfig) -> StreamConfig:
    """The stream's configuration after ``data`` (a parsed ``Configure``), or ``ConfigureRefused``."""
    unknown = sorted(set(data) - {"type", *CONFIGURE_FIELDS})
    if unknown:
        raise ConfigureRefused(INVALID, f"{unknown[0][:40]}: not a field of Configure; its fields are: "
                                        f"{', '.join(CONFIGURE_FIELDS)}")
    keyterms = _keyterms(data.get("keyterms"), current.keyterms)
    _check_language_hints(data.get("language_hints"))
    for name in ("numerals", "profanity_filter"):
        value = data.get(name)
        if value is not None and not isinstance(value, bool):
            raise ConfigureRefused(INVALID, f"{name}: must be true or false")
        if value:
            raise ConfigureRefused(UNSUPPORTED, f"{name}=true: not supported; "
                                   + ("numbers are written the way the recognizer writes them" if name == "numerals"
                                      else "no profanity filter runs here"))
    thresholds = data.get("thresholds")
    if thresholds is None:
        return StreamConfig(current.thresholds, keyterms)
    if not isinstance(thresholds, dict):
        raise ConfigureRefused(INVALID, "thresholds: must be an object")
    return StreamConfig(_new_thresholds(thresholds, current.thresholds), keyterms)


def _string_list(name: str, value: Any) -> list[Any]:
    """``value`` as a list: one string is a list of one (the SDK's types allow it)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise ConfigureRefused(INVALID, f"{name}: must be a list of strings")
    return value


def _keyterms(value: Any, current: tuple[str, ...]) -> tuple[str, ...]:
    """The key terms after a ``Configure``: ``current`` when it gives none (``null`` or absent)."""
    if value is None:
        return current
    try:
        return parse_terms(_string_list("keyterms", value), "keyterms")
    except VocabularyError as exc:
        raise ConfigureRefused(INVALID, str(exc)) from None


def _check_language_hints(value: Any) -> None:
    if value is None:
        return
    hints = _string_list("language_hints", value)
    if not all(isinstance(item, str) for item in hints):
        raise ConfigureRefused(INVALID, "language_hints: must be a list of strings")
    if hints:
        raise ConfigureRefused(UNSUPPORTED, f"language_hints: not supported; {LANGUAGE_HINTS_REFUSED}")


def _new_thresholds(fields: dict[str, Any], current: Thresholds) -> Thresholds:
    unknown = sorted(set(fields) - set(THRESHOLD_FIELDS))
    if unknown:
        raise ConfigureRefused(INVALID, f"thresholds.{unknown[0][:40]}: not a threshold; the thresholds are: "
                                        f"{', '.join(THRESHOLD_FIELDS)}")
    new = current
    try:
        if fields.get("eot_threshold") is not None:
            new = replace(new, eot_threshold=number("eot_threshold", fields["eot_threshold"], *EOT_THRESHOLD_RANGE))
        if fields.get("eot_timeout_ms") is not None:
            new = replace(new, eot_timeout_ms=timeout_ms(fields["eot_timeout_ms"]))
        if fields.get("eager_eot_threshold") is not None:
            new = replace(new, eager_eot_threshold=number("eager_eot_threshold", fields["eager_eot_threshold"],
                                                          *EAGER_EOT_THRESHOLD_RANGE))
        new = new.checked()
    except BadRequest as exc:
        raise ConfigureRefused(INVALID, exc.message) from None
    if (current.eager_eot_threshold is None) != (new.eager_eot_threshold is None):
        raise ConfigureRefused(UNSUPPORTED, "eager_eot_threshold: eager ends of turn are switched on or off when "
                                            "the stream opens here; open a new stream with it in the query")
    if new.manual != current.manual or new.silence_ms != current.silence_ms:
        raise ConfigureRefused(UNSUPPORTED, f"eot_threshold/eot_timeout_ms: this change needs a turn silence of "
                                            f"{new.silence_ms} ms and the stream's is fixed at {current.silence_ms} "
                                            "ms when it opens here; open a new stream with them in the query")
    return new
