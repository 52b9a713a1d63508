"""What each ElevenLabs field does here: honoured, refused by name and why, or
(the ones ElevenLabs' SDK and the agent frameworks send on every request, listed
in ``NO_EFFECT``) accepted with a documented meaning. A field ElevenLabs does
not define is refused too.

- ``model_id``: an engine of this gateway picks it; an ElevenLabs model
  (``eleven_*``) speaks with the configured default engine; another name is refused.
- ``language_code``: an engine that takes a language (OmniVoice) gets it; another
  engine accepts only a language its voices speak.
- ``voice_settings``: refused, except ``speed`` 1.0 (the engines take no voice settings).
- ``generation_config.chunk_length_schedule``: accepted; synthesis starts at each
  sentence end whatever the schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engines.base import TtsEngine
from gateway.errors import BadRequest, GatewayError
from gateway.protocol.query import query_bool, refuse_unknown_params

SOCKET_QUERY = ("model_id", "language_code", "output_format", "inactivity_timeout", "sync_alignment", "auto_mode",
                "enable_logging", "enable_ssml_parsing", "apply_text_normalization",
                "apply_language_text_normalization", "optimize_streaming_latency")
HTTP_QUERY = ("output_format", "enable_logging", "optimize_streaming_latency")
HTTP_BODY = ("text", "model_id", "language_code", "voice_settings", "seed", "apply_text_normalization",
             "apply_language_text_normalization", "pronunciation_dictionary_locators", "previous_text", "next_text",
             "previous_request_ids", "next_request_ids", "use_pvc_as_ivc")
# accepted with any value; what each means here
NO_EFFECT = {
    "enable_logging": "this server keeps no record of the text either way",
    "optimize_streaming_latency": "audio is sent as soon as each frame exists; there is nothing to trade",
    "sync_alignment": "alignment always comes with the audio chunk it times",
    "auto_mode": "synthesis starts at each sentence end either way",
    "try_trigger_generation": "synthesis starts at each sentence end either way",
    "generation_config.chunk_length_schedule": "synthesis starts at each sentence end whatever the schedule",
}
# HTTP body fields refused when they carry a value
BODY_REFUSED = {
    "pronunciation_dictionary_locators": "pronunciation dictionaries are not served here",
    "previous_text": "the engines here are not conditioned on neighbouring text",
    "next_text": "the engines here are not conditioned on neighbouring text",
    "previous_request_ids": "the engines here are not conditioned on earlier requests",
    "next_request_ids": "the engines here are not conditioned on later requests",
}
VOICE_SETTINGS = ("stability", "similarity_boost", "style", "use_speaker_boost", "speed")


def check_socket_query(query: Mapping[str, str]) -> None:
    """``BadRequest`` for a ``stream-input`` / ``multi-stream-input`` parameter that cannot be honoured."""
    refuse_unknown_params(query, SOCKET_QUERY)
    for name in ("enable_logging", "sync_alignment", "auto_mode"):
        query_bool(query, name, False)
    _check_text_options(query.get("enable_ssml_parsing"), query.get("apply_text_normalization"),
                        query.get("apply_language_text_normalization"))


def check_http(query: Mapping[str, str], body: Mapping[str, Any]) -> None:
    """``BadRequest`` for a query parameter or body field of the HTTP route that cannot be honoured."""
    refuse_unknown_params(query, HTTP_QUERY)
    query_bool(query, "enable_logging", False)
    unknown = sorted(set(body) - set(HTTP_BODY))
    if unknown:
        raise BadRequest(f"{unknown[0][:40]}: not a field of this request; the fields are: {', '.join(HTTP_BODY)}")
    for name, why in BODY_REFUSED.items():
        if body.get(name):
            raise BadRequest(f"{name}: not supported; {why}")
    if body.get("use_pvc_as_ivc"):
        raise BadRequest("use_pvc_as_ivc: not supported; the voices here are this server's own")
    check_voice_settings(body.get("voice_settings"), BadRequest)
    _check_text_options(None, body.get("apply_text_normalization"), body.get("apply_language_text_normalization"))


def check_voice_settings(value: object, error: type[GatewayError]) -> None:
    """``voice_settings``: none, or ``speed`` 1.0; any other setting is refused."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise error("voice_settings must be an object")
    for name, setting in value.items():
        if setting is None or (name == "speed" and setting in (1, 1.0) and not isinstance(setting, bool)):
            continue
        what = "speaks at speed 1.0 only" if name == "speed" else "take no voice settings"
        if name not in VOICE_SETTINGS:
            what = "take no voice settings (and ElevenLabs defines no such one)"
        subject = "this server" if name == "speed" else "the engines here"
        raise error(f"voice_settings.{str(name)[:40]}: not supported; {subject} {what}")


def check_generation_config(value: object, error: type[GatewayError]) -> None:
    """``generation_config``: only ``chunk_length_schedule`` (accepted, see ``NO_EFFECT``)."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise error("generation_config must be an object")
    for name in value:
        if name != "chunk_length_schedule":
            raise error(f"generation_config.{str(name)[:40]}: not supported; only chunk_length_schedule is taken")


def _check_text_options(ssml: str | bool | None, normalization: object, language_normalization: object) -> None:
    if ssml in (True, "true", "True", "1"):
        raise BadRequest("enable_ssml_parsing: not supported; SSML is not parsed here (its tags would be spoken)")
    if normalization not in (None, "", "auto"):
        raise BadRequest(f"apply_text_normalization: {str(normalization)[:20]!r} is not supported; each engine "
                         "prepares text its own way (auto)")
    if language_normalization in (True, "true", "True", "1"):
        raise BadRequest("apply_language_text_normalization: not supported; each engine prepares text its own way")


def engine_id_for(engines: Mapping[str, TtsEngine], model_id: str | None, default: str) -> str:
    """A ``model_id`` naming one of the gateway's engines picks it; ElevenLabs' own
    model names (``eleven_flash_v2_5``) get the configured default engine."""
    if not model_id or model_id.startswith("eleven_"):
        return default
    if model_id in engines:
        return model_id
    raise BadRequest(f"model_id: {model_id[:40]!r} is not a model here; use an engine ({', '.join(sorted(engines))}) "
                     f"or an ElevenLabs model (eleven_*), which speaks with the default engine ({default})")


def language_options(engine: TtsEngine, language_code: object) -> dict[str, str]:
    """``SynthesisOptions.extra`` for ``language_code``: the language for an engine that
    takes one; for another, nothing when its voices speak that language, else refused."""
    if language_code is None or language_code == "":
        return {}
    info = engine.info()
    if not isinstance(language_code, str):
        raise BadRequest("language_code: must be a string such as \"en\"")
    if "language" in info.options:
        return {"language": language_code}
    if language_code.split("-")[0].lower() in info.languages:
        return {}
    raise BadRequest(f"language_code: the {info.id} engine speaks {', '.join(info.languages)} only, not "
                     f"{language_code[:20]!r}")
