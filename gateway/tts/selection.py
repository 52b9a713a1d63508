"""Picking and checking a TTS engine and voice for a request, and turning
engine errors into gateway errors: what the /v1/tts socket, the speech HTTP
routes and the voice routes share."""

from __future__ import annotations

from collections.abc import Mapping

from engines.base import (
    EngineError,
    EngineState,
    EngineUnavailable,
    SynthesisOptions,
    TtsEngine,
    UnknownVoice,
)
from engines.options import unsupported_option
from gateway.engine_notice import engine_unavailable
from gateway.errors import CODES, BadRequest, GatewayError, OverCapacity, Unavailable


def pick_engine(engines: Mapping[str, TtsEngine], engine_id: str) -> TtsEngine:
    """The engine called ``engine_id``; ``BadRequest`` naming the available ones."""
    engine = engines.get(engine_id)
    if engine is None:
        available = ", ".join(sorted(engines)) or "(none: this gateway runs no TTS engine)"
        raise BadRequest(f"engine: unknown engine {engine_id[:40]!r}; available: {available}",
                         code="unknown_engine")
    return engine


def check_ready(engine: TtsEngine) -> None:
    """Raise ``engine_loading`` or ``engine_unavailable`` unless the engine is ready; the
    message names the engine and its state, never the server's detail or hint
    (gateway/engine_notice.py)."""
    status = engine.status()
    if status.state is EngineState.READY:
        return
    name = engine.info().id
    if status.state is EngineState.LOADING:
        raise Unavailable(f"engine {name} is still loading; try again in a few seconds", code="engine_loading",
                          retry_after_s=2, extra={"state": status.state.value})
    raise engine_unavailable(name, status.state)


def check_options(engine: TtsEngine, seed: int | None, options: Mapping[str, str] | None, *,
                  prefix: str = "", error: type[GatewayError] = BadRequest) -> None:
    """Refuse (``error``, its message naming the field, the engine and what it takes)
    a per-utterance option the engine does not honour, before any work is queued;
    ``prefix`` names the message the field came in (``"speak."``)."""
    message = unsupported_option(engine.info(), SynthesisOptions(seed=seed, extra=dict(options or {})))
    if message is not None:
        raise error(prefix + message)


def voice_ids(engine: TtsEngine) -> list[str]:
    return [v.id for v in engine.voices()]


def resolve_voice(engine: TtsEngine, voice: str | None) -> str | None:
    """``voice`` if the engine has it, the engine's default for None; raises the
    ``unknown_voice`` error listing the available voices."""
    if voice is None:
        return engine.info().default_voice
    available = voice_ids(engine)
    if voice not in available:
        raise unknown_voice(voice, available)
    return voice


def unknown_voice(voice: str, available: list[str]) -> GatewayError:
    exc = UnknownVoice(voice[:64], available)
    return BadRequest(str(exc), code="unknown_voice", extra={"voices": available})


def gateway_error(exc: EngineError) -> GatewayError:
    """The gateway error for an engine error (same code where the table has it, hint appended).
    An unavailable engine's own message and hint stay on the server: they may name paths."""
    if isinstance(exc, UnknownVoice):
        return unknown_voice(exc.voice, exc.available)
    if isinstance(exc, EngineUnavailable):
        return engine_unavailable(exc.engine or "tts", exc.state)
    message = f"{exc}. {exc.hint}" if exc.hint else str(exc)
    if exc.code == "over_capacity":  # the engine's own queue is full: retry shortly
        return OverCapacity(message)
    if exc.code in ("bad_request", "bad_audio"):
        return BadRequest(message, code=exc.code)
    return GatewayError(message, code=exc.code if exc.code in CODES else "engine_error")


def voice_not_found(voice: str, available: list[str]) -> GatewayError:
    return GatewayError(str(UnknownVoice(voice[:64], available)), code="voice_not_found",
                        extra={"voices": available})
