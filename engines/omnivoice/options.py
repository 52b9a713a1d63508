"""The per-utterance options OmniVoice takes from ``SynthesisOptions.extra``:
``instruct`` (a voice description) and ``language``, checked against the
package's own lists (``PackageChecks``) before any work is queued, so a bad
value is refused at once with an error that says what is accepted.
"""

from __future__ import annotations

from engines.base import EngineError
from engines.omnivoice.backend import PackageChecks


def instruct_option(checks: PackageChecks | None, value: object) -> str | None:
    """``instruct``, a voice description: stripped, None when blank; the package's own check decides the rest."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise EngineError("instruct: must be a string such as \"female, low pitch, british accent\"",
                          code="bad_request")
    check = checks.check_instruct if checks is not None else None
    if check is not None:
        try:
            check(value)
        except ValueError as exc:
            raise EngineError(f"instruct: {exc}", code="bad_request") from None
    return value.strip()


def language_option(checks: PackageChecks | None, value: object) -> str | None:
    """``language``: the package's id for a code or an English name, None when not given."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or checks is None or checks.language(value) is None:
        raise EngineError(f"language: {str(value)[:40]!r} is not a language OmniVoice knows; use an ISO 639 code "
                          "(en, zh, ja, de, ...) or an English name (English, German, ...)", code="bad_request")
    return checks.language(value)
