"""``POST /v1/text-to-speech/{voice_id}/stream`` (and the same without
``/stream``): ElevenLabs' HTTP text to speech, streamed as it is synthesized.

Body: ``{"text", "model_id", "language_code", "seed", ...}`` (what each field
does: gateway/fronts/elevenlabs/fields.py); query: ``output_format`` (the
socket's formats, MP3 44.1 kHz by default, like ElevenLabs). Errors are
ElevenLabs-shaped: ``{"detail": {"status": "<code>", "message": "..."}}`` with
the status of the gateway's error table; auth refusals stay AUTH.md's.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.codecs.pyav import load_av
from gateway.errors import BadRequest, GatewayError
from gateway.fronts.elevenlabs.fields import check_http, engine_id_for, language_options
from gateway.fronts.elevenlabs.params import parse_output_format, voice_for
from gateway.protocol.json import read_json_object
from gateway.protocol.tts import TextLimits, seed_field
from gateway.protocol.tts_http import body_text
from gateway.tts.routes import speech_response
from gateway.tts.selection import check_ready, pick_engine

TEXT_LIMITS = TextLimits()


async def text_to_speech(request: Request) -> Response:
    state = request.state
    try:
        audio = parse_output_format(request.query_params.get("output_format"))
        body = await read_json_object(request, TEXT_LIMITS.max_message_bytes)
        check_http(request.query_params, body)
        text = body_text(body, "text", TEXT_LIMITS)
        model_id = body.get("model_id")
        engine = pick_engine(state.tts, engine_id_for(state.tts, model_id if isinstance(model_id, str) else None,
                                                      state.settings.tts_engine))
        check_ready(engine)
        if audio.format.needs_av:
            load_av()
        voice = voice_for(engine, str(request.path_params.get("voice_id", "")))
        options = language_options(engine, body.get("language_code"))
        seed = seed_field(body, "seed", BadRequest)
        return speech_response(request, engine, text, voice, audio.sample_rate, audio.format, seed=seed,
                               options=options)
    except GatewayError as exc:
        headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
        return JSONResponse({"detail": {"status": exc.code, "message": exc.message}}, status_code=exc.http_status,
                            headers=headers)
