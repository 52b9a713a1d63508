"""The ``info`` answer to ``describe``: one ASR program (the dictation sidecar's
model) and one TTS program per TTS engine (default engine first, since a
client that selects no program uses the first one), with every voice."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.base import AsrService, EngineState, TtsEngine
from gateway.engine_view import public_model_name
from gateway.fronts.wyoming.wire import Event

ASR_PROGRAM = "voxgate-asr"
TTS_PROGRAM_PREFIX = "voxgate-"
VOXGATE = {"name": "voxgate", "url": ""}
ENGINE_ATTRIBUTION = {
    "piper": {"name": "rhasspy (Piper)", "url": "https://github.com/rhasspy/piper"},
    "pocket": {"name": "Kyutai (Pocket TTS)", "url": "https://github.com/kyutai-labs/pocket-tts"},
}
WHISPER = {"name": "OpenAI (Whisper), via faster-whisper", "url": "https://github.com/SYSTRAN/faster-whisper"}


def tts_program_name(engine_id: str) -> str:
    return TTS_PROGRAM_PREFIX + engine_id


def ordered_engines(engines: Mapping[str, TtsEngine], default: str) -> list[str]:
    """Engine ids with the default first."""
    return sorted(engines, key=lambda name: (name != default, name))


def build_info(engines: Mapping[str, TtsEngine], default_engine: str, asr: AsrService | None,
               version: str) -> Event:
    """``version``: the gateway's, given to the listener by the app that builds it."""
    data: dict[str, Any] = {"asr": [], "tts": [], "handle": [], "intent": [], "wake": [], "mic": [], "snd": []}
    if asr is not None:
        data["asr"].append(_asr_program(asr, version))
    for name in ordered_engines(engines, default_engine):
        data["tts"].append(_tts_program(name, engines[name], version))
    return Event("info", data)


def _artifact(name: str, attribution: dict[str, str], installed: bool, description: str,
              version: str | None) -> dict[str, Any]:
    return {"name": name, "attribution": dict(attribution), "installed": installed, "description": description,
            "version": version}


def _asr_program(asr: AsrService, version: str) -> dict[str, Any]:
    ready = asr.status().state is EngineState.READY
    languages = list(asr.info().get("languages") or [])
    name = public_model_name(asr.model_name)
    model = {**_artifact(name, WHISPER, ready, f"Whisper {name}", None),
             "languages": languages}
    return {**_artifact(ASR_PROGRAM, VOXGATE, ready,
                        "voxgate dictation: faster-whisper with Silero VAD, streaming partials", version),
            "models": [model], "supports_transcript_streaming": True, "requires_external_vad": False,
            "prefers_auto_gain_enabled": True, "prefers_noise_reduction_enabled": True}


def _tts_program(name: str, engine: TtsEngine, version: str) -> dict[str, Any]:
    ready = engine.status().state is EngineState.READY
    attribution = ENGINE_ATTRIBUTION.get(name, VOXGATE)
    voices = [{**_artifact(v.id, attribution, ready, f"{name} voice {v.name or v.id}", None),
               "languages": [v.language], "speakers": None} for v in engine.voices()]
    return {**_artifact(tts_program_name(name), VOXGATE, ready, f"voxgate {name} TTS, streamed per sentence",
                        version),
            "voices": voices, "supports_synthesize_streaming": True}
