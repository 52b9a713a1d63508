"""Whether the ASR service can take a request, and whether it knows the
language asked for: one answer for the dictation socket, the transcription
route and every front.

A LOADING service is not refused here: the socket waits for a first start
(``DictationSession``), the HTTP routes send their request and the supervisor
answers it once ready or with ``asr_unavailable``.
"""

from __future__ import annotations

from collections.abc import Sequence

from engines.base import AsrService, EngineState
from gateway.dictation.faults import disabled_error, unavailable_error
from gateway.engine_view import public_model_name
from gateway.errors import BadRequest, Unavailable

SHOWN_LANGUAGES = 20  # a multilingual model knows ~100; the error lists the first ones
INSTALL_HINT = "; an admin can install multilingual Whisper base"


def asr_refusal(asr: AsrService | None) -> Unavailable | None:
    """Why ``asr`` cannot take work (not enabled, its model missing, failed), or None."""
    if asr is None:
        return disabled_error()
    status = asr.status()
    if status.state in (EngineState.MISSING, EngineState.FAILED):
        return unavailable_error(status)
    return None


def supports_language(languages: Sequence[str], language: str | None) -> bool:
    """``languages``: what the recognizer knows (empty: anything); None or ``auto`` detects."""
    return language is None or language == "auto" or not languages or language in languages


def shown_languages(languages: Sequence[str]) -> str:
    return ", ".join(languages[:SHOWN_LANGUAGES]) + (" ..." if len(languages) > SHOWN_LANGUAGES else "")


def language_refusal(asr: AsrService, language: str | None, *, install_hint: bool) -> BadRequest | None:
    """The ``unsupported_language`` error for ``language`` on ``asr``, or None when it is known.
    ``install_hint``: an English-only model's error says a multilingual one can be installed.
    A model configured as a local path is named by its last component."""
    languages = list(asr.info()["languages"])
    if language is None or supports_language(languages, language):
        return None
    hint = INSTALL_HINT if install_hint and languages == ["en"] else ""
    return BadRequest(f"language: the ASR model {public_model_name(asr.model_name)} does not support {language[:10]!r} "
                      f"(available: {shown_languages(languages)}){hint}", code="unsupported_language")
