"""One answer to "can the ASR take this request, in this language"."""

from __future__ import annotations

from typing import Any, cast

import pytest

from engines.base import AsrService, EngineState, EngineStatus
from gateway.dictation.asr_gate import asr_refusal, language_refusal, supports_language


class Recognizer:
    """Just what the gate reads of an ASR service."""

    model_name = "tiny.en"

    def __init__(self, status: EngineStatus, languages: list[str]) -> None:
        self._status, self._languages = status, languages

    def status(self) -> EngineStatus:
        return self._status

    def info(self) -> dict[str, Any]:
        return {"languages": self._languages}


def asr(state: EngineState = EngineState.READY, languages: list[str] | None = None, **status: str) -> AsrService:
    return cast(AsrService, Recognizer(EngineStatus(state, **status), ["en"] if languages is None else languages))


def test_no_asr_is_refused_as_not_enabled() -> None:
    refusal = asr_refusal(None)
    assert refusal is not None
    assert (refusal.code, refusal.message) == ("engine_unavailable", "Speech recognition is not enabled on this gateway")


@pytest.mark.parametrize("state", [EngineState.MISSING, EngineState.FAILED])
def test_a_missing_or_failed_asr_is_refused_with_its_state_not_its_detail(state: EngineState) -> None:
    refusal = asr_refusal(asr(state, detail="no weights in /srv/models", hint="voxgate models install whisper-base"))
    assert refusal is not None
    words = {EngineState.MISSING: "not installed", EngineState.FAILED: "failed to load"}[state]
    assert (refusal.code, refusal.message, refusal.extra) == (
        "engine_unavailable",
        f"Speech recognition is not available on this gateway ({words}); an admin can see why at GET /v1/engines",
        {"state": state.value})


@pytest.mark.parametrize("state", [EngineState.READY, EngineState.LOADING])
def test_a_ready_or_loading_asr_is_not_refused(state: EngineState) -> None:
    assert asr_refusal(asr(state)) is None


@pytest.mark.parametrize(("languages", "language", "known"), [
    (["en"], "en", True), (["en"], "de", False), (["en"], "auto", True), (["en"], None, True), ([], "xx", True),
])
def test_supports_language(languages: list[str], language: str | None, known: bool) -> None:
    assert supports_language(languages, language) is known


def test_an_english_model_refuses_another_language_and_says_how_to_get_one() -> None:
    refusal = language_refusal(asr(), "de", install_hint=True)
    assert refusal is not None
    assert (refusal.code, refusal.message) == (
        "unsupported_language", ("language: the ASR model tiny.en does not support 'de' (available: en); "
        "an admin can install multilingual Whisper base"))
    refusal = language_refusal(asr(), "de", install_hint=False)
    assert refusal is not None
    assert refusal.message == "language: the ASR model tiny.en does not support 'de' (available: en)"


def test_a_long_language_list_is_cut_at_twenty() -> None:
    known = [f"l{i:02d}" for i in range(25)]
    refusal = language_refusal(asr(languages=known), "zz", install_hint=True)
    assert refusal is not None
    assert refusal.message == (f"language: the ASR model tiny.en does not support 'zz' "
                               f"(available: {', '.join(known[:20])} ...)")
    assert language_refusal(asr(languages=known), "l24", install_hint=True) is None
