"""Per-utterance synthesis options: which an engine honours (``TtsInfo.options``)
and the message that refuses any other, naming the engine and what it takes."""

from __future__ import annotations

from engines.base import EngineError, SynthesisOptions, TtsInfo

# Every per-utterance option an engine may honour: ``seed`` and ``temperature``
# (SynthesisOptions' own fields) and the ``extra`` keys, with what an engine that
# lacks one says about it.
OPTION_NAMES = ("seed", "temperature", "language", "instruct", "speaker")
_WHY_NOT = {
    "seed": "cannot be seeded (its output does not depend on a seed it can be given)",
    "temperature": "has no sampling temperature",
    "language": "takes no language option (its voices set the language)",
    "instruct": "takes no voice description (instruct)",
    "speaker": "has no speaker option (no multi-speaker voices)",
}


def unsupported_option(info: TtsInfo, options: SynthesisOptions | None) -> str | None:
    """The message for the first option ``options`` sets that ``info.options`` does
    not list (``"seed: the piper engine cannot be seeded ...; it takes: speaker"``),
    None when every option it sets is honoured. An unknown ``extra`` key is refused too."""
    if options is None:
        return None
    given = [name for name, value in (("seed", options.seed), ("temperature", options.temperature))
             if value is not None]
    given += [str(key) for key, value in options.extra.items() if value is not None]
    for name in given:
        if name not in info.options:
            why = _WHY_NOT.get(name, "has no such option")
            return f"{name}: the {info.id} engine {why}; options it takes: {', '.join(info.options) or '(none)'}"
    return None


def check_options(info: TtsInfo, options: SynthesisOptions | None) -> None:
    """Raise ``EngineError`` (``bad_request``) for an option the engine does not honour."""
    message = unsupported_option(info, options)
    if message is not None:
        raise EngineError(message, code="bad_request")
