"""Flux's ``Configure`` message: what a stream may change once it is open.

The recognizer's end-of-turn silence and its eager finals are options of the
stream, chosen when it opens, so a ``Configure`` is honoured when it leaves
them as they are (the same thresholds, another ``eager_eot_threshold`` while
eager ends of turn are on, another ``eot_timeout_ms`` while the confidence rule
ends turns first, no key terms, no language hints, no numerals or profanity
filter) and refused otherwise, with a ``ConfigureFailure`` whose code says
which: ``INVALID_CONFIGURE`` (a field Flux does not define, a value out of
range) or ``UNSUPPORTED_CONFIGURE`` (a change this server cannot make). The
stream goes on either way, with its thresholds unchanged after a refusal.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.errors import BadRequest
from gateway.fronts.flux.params import (
    EAGER_EOT_THRESHOLD_RANGE,
    EOT_THRESHOLD_RANGE,
    Thresholds,
    number,
    timeout_ms,
)

CONFIGURE_FIELDS = ("thresholds", "keyterms", "language_hints", "numerals", "profanity_filter")
THRESHOLD_FIELDS = ("eager_eot_threshold", "eot_threshold", "eot_timeout_ms")
INVALID = "INVALID_CONFIGURE"
UNSUPPORTED = "UNSUPPORTED_CONFIGURE"


class ConfigureRefused(Exception):
    def __init__(self, code: str, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


def apply_configure(data: dict[str, Any], current: Thresholds) -> Thresholds:
    """The thresholds after ``data`` (a parsed ``Configure``), or ``ConfigureRefused``."""
    unknown = sorted(set(data) - {"type", *CONFIGURE_FIELDS})
    if unknown:
        raise ConfigureRefused(INVALID, f"{unknown[0][:40]}: not a field of Configure; its fields are: "
                                        f"{', '.join(CONFIGURE_FIELDS)}")
    _check_lists(data)
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
        return current
    if not isinstance(thresholds, dict):
        raise ConfigureRefused(INVALID, "thresholds: must be an object")
    return _new_thresholds(thresholds, current)


def _check_lists(data: dict[str, Any]) -> None:
    for name, why in (("keyterms", "the recognizer here takes no key terms"),
                      ("language_hints", "the recognizer here takes no language hints")):
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigureRefused(INVALID, f"{name}: must be a list of strings")
        if value:
            raise ConfigureRefused(UNSUPPORTED, f"{name}: not supported; {why}")


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
