"""A stream's ``open`` frame from the gateway, read into its ``StreamOptions``.

A value the sidecar cannot honour is refused with a ``ValueError`` naming the
field (the server answers it as the stream's ``error`` event): a language the
model does not know, or a ``turn_threshold`` when no end-of-turn model was
loaded or outside 0..1.
"""

from __future__ import annotations

from typing import Any

from .framing import header_prompt, header_terms
from .utterance import StreamOptions, full_window_finals


def check_language(language: str | None, languages: list[str], model_id: str) -> None:
    if language is not None and language not in languages:
        err = ValueError(f"model {model_id} does not support language {language!r}; "
                         f"available: {', '.join(languages[:12])}" + (" ..." if len(languages) > 12 else ""))
        err.code = "unsupported_language"  # type: ignore[attr-defined]
        raise err


def turn_threshold(header: dict[str, Any], turn_model: bool) -> float | None:
    value = header.get("turn_threshold")
    if value is None:
        return None
    if not turn_model:
        raise ValueError("turn_threshold: this sidecar has no end-of-turn model")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"turn_threshold: must be a number from 0 to 1, not {value!r}")
    return float(value)


def stream_options(header: dict[str, Any], languages: list[str], model_id: str, final_window: str, *,
                   turn_model: bool) -> StreamOptions:
    language = header.get("language")
    check_language(language, languages, model_id)
    eager = bool(header.get("eager", False))
    return StreamOptions(
        language=language, interim=bool(header.get("interim", True)),
        word_timestamps=bool(header.get("word_timestamps", False)),
        silence_ms=int(header.get("silence_ms", 500)), offset=int(header.get("offset", 0)),
        first_utterance=int(header.get("first_utterance", 0)), stable=str(header.get("stable", "")),
        eager=eager, full_window_finals=full_window_finals(final_window, eager), prompt=header_prompt(header),
        terms=header_terms(header), turn_threshold=turn_threshold(header, turn_model))
