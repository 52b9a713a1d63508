"""Routes of the TTS feature: the /v1/tts socket and the speech HTTP routes.

- ``WS /v1/tts``: a ``TtsSession`` per socket (gateway/tts.py).
- ``POST /v1/tts``: JSON in, chunked streaming WAV or raw PCM out.
- ``POST /v1/audio/speech``: the OpenAI speech request and response formats.
- the voice routes live in gateway/tts_voices.py.

Every route is declared with its access class; the auth middleware enforces it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket

from auth.access import RouteClass, http_route, ws_route

from .audio import Encoding, parse_rate, wav_header
from .errors import CLOSE_SERVER_ERROR, CLOSE_TRY_AGAIN, BadRequest, GatewayError, OverCapacity, TooLarge
from .protocol.tts import MAX_SEED, Ready, TextLimits, parse_tts_params
from .tts import SessionConfig, TtsSession
from .tts_common import check_ready, open_audio, pick_engine, resolve_voice
from .tts_voices import voice_routes

log = logging.getLogger("voxgate.tts")

TEXT_LIMITS = TextLimits()
OPENAI_RATE = 24000  # OpenAI's wav and pcm are 24 kHz, 16-bit, mono
# OpenAI's stock voice names; a client written for OpenAI sends one of them and
# gets this gateway's default voice unless a voice of that name exists here.
OPENAI_VOICES = frozenset({"alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage",
                           "shimmer", "verse", "marin", "cedar"})


# ---- the socket


async def tts_socket(websocket: WebSocket) -> None:
    """``/v1/tts``: validate the query, check the engine, voice and capacity, then run the session."""
    state = websocket.state
    settings = state.settings
    await websocket.accept()
    try:
        params = parse_tts_params(websocket.query_params, settings.tts_engine)
        engine = pick_engine(state.tts, params.engine)
        check_ready(engine)
        voice = resolve_voice(engine, params.voice)
    except GatewayError as exc:
        await _refuse(websocket, exc)
        return
    info = engine.info()
    session = TtsSession(ws=websocket, engine=engine, voice=voice, sample_rate=params.sample_rate or info.sample_rate,
                         encoding=params.encoding,
                         config=SessionConfig(limits=TEXT_LIMITS, idle_timeout_s=settings.idle_timeout_s))
    entry = state.sessions.add("tts", _client(websocket), session.describe)
    if entry is None:
        await _refuse(websocket, OverCapacity(
            f"too many TTS sessions (limit {settings.max_tts_sessions}); try again later"))
        return
    try:
        ready = Ready(engine=info.id, voice=voice, sample_rate=session.sample_rate, encoding=params.encoding.value,
                      frame_samples=info.frame_samples, session=entry.id)
        await websocket.send_text(json.dumps(ready.to_dict()))
        await session.run()
    finally:
        state.sessions.remove(entry.id)


async def _refuse(websocket: WebSocket, exc: GatewayError) -> None:
    """Tell the client why (an ``error`` event with the code) and close with the matching code."""
    code = exc.close_code or (CLOSE_TRY_AGAIN if exc.retryable else CLOSE_SERVER_ERROR)
    try:
        await websocket.send_text(json.dumps(exc.to_event()))
        await websocket.close(code, exc.message[:120])
    except Exception:  # the client left first
        log.debug("refusal not delivered")


def _client(conn: Request | WebSocket) -> str:
    return f"{conn.client.host}:{conn.client.port}" if conn.client else "?"


# ---- HTTP speech


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    """The request body as a JSON object; 413 past ``max_bytes``, 400 if not an object."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise TooLarge(f"request body of {declared} bytes; the limit is {max_bytes}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise TooLarge(f"request body is larger than {max_bytes} bytes")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("body: not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("body: must be a JSON object")
    return data


def _text(data: dict, field: str) -> str:
    text = data.get(field)
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(f"{field}: required, a non-empty string")
    if len(text) > TEXT_LIMITS.max_chars:
        raise TooLarge(f"{field}: {len(text)} characters; the limit is {TEXT_LIMITS.max_chars}", code="text_too_long")
    return text


def _opt_str(data: dict, field: str) -> str | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{field}: must be a non-empty string")
    return value


def _speech_response(request: Request, engine: Any, text: str, voice: str | None, rate: int, encoding: Encoding,
                     wav: bool, seed: int | None) -> Response:
    """Register the request as a TTS session and stream its audio."""
    sessions = request.state.sessions
    sent = {"bytes": 0}
    entry = sessions.add("tts", _client(request), lambda: {
        "engine": engine.info().id, "voice": voice, "route": request.url.path, "sample_rate": rate,
        "audio_s_sent": round(sent["bytes"] / encoding.sample_bytes / rate, 3)})
    if entry is None:
        raise OverCapacity(f"too many TTS sessions (limit {request.state.settings.max_tts_sessions}); try again later")

    try:
        audio = open_audio(engine, text, voice, rate, encoding, seed)
    except GatewayError:
        sessions.remove(entry.id)
        raise

    async def body() -> AsyncIterator[bytes]:
        try:
            if wav:
                yield wav_header(rate, encoding)
            async for chunk in audio:
                sent["bytes"] += len(chunk)
                yield chunk
        except GatewayError as exc:  # the status line is gone: the stream just ends short
            log.warning("TTS HTTP stream ended early: %s", exc.message)
        finally:
            await cleanup()

    async def cleanup() -> None:  # after the body, or instead of it when the client left first
        await audio.aclose()
        sessions.remove(entry.id)

    if wav:
        media_type = "audio/wav"
    else:
        media_type = f"audio/pcm;rate={rate};encoding={encoding.value}"
    headers = {"X-Sample-Rate": str(rate), "X-Encoding": encoding.value, "Cache-Control": "no-store"}
    return StreamingResponse(body(), media_type=media_type, headers=headers,
                             background=BackgroundTask(cleanup))


async def tts_http(request: Request) -> Response:
    """``POST /v1/tts``: ``{"text","voice","engine","format","sample_rate","seed"}`` -> streaming audio."""
    state = request.state
    data = await read_json(request, TEXT_LIMITS.max_message_bytes)
    text = _text(data, "text")
    fmt = data.get("format", "wav")
    formats = {"wav": Encoding.S16LE, "pcm_s16le": Encoding.S16LE, "pcm_f32le": Encoding.F32LE}
    if fmt not in formats:
        raise BadRequest(f"format: must be one of: {', '.join(formats)}")
    engine = pick_engine(state.tts, _opt_str(data, "engine") or state.settings.tts_engine)
    rate = data.get("sample_rate")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, int):
            raise BadRequest("sample_rate: must be an integer")
        try:
            rate = parse_rate(rate)
        except ValueError as exc:
            raise BadRequest(f"sample_rate: {exc}") from None
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        raise BadRequest(f"seed: must be an integer between 0 and {MAX_SEED}")
    check_ready(engine)
    voice = resolve_voice(engine, _opt_str(data, "voice"))
    return _speech_response(request, engine, text, voice, rate or engine.info().sample_rate, formats[fmt],
                            wav=fmt == "wav", seed=seed)


async def openai_speech(request: Request) -> Response:
    """``POST /v1/audio/speech``: OpenAI-compatible (``model``, ``input``, ``voice``,
    ``response_format`` wav or pcm); 24 kHz 16-bit mono like OpenAI's."""
    state = request.state
    data = await read_json(request, TEXT_LIMITS.max_message_bytes)
    text = _text(data, "input")
    fmt = data.get("response_format") or "wav"  # OpenAI's default is mp3, which is not offered here
    if fmt not in ("wav", "pcm"):
        raise BadRequest(f"response_format: {str(fmt)[:20]!r} is not supported; use wav or pcm")
    if data.get("stream_format") not in (None, "audio"):
        raise BadRequest("stream_format: only 'audio' is supported")
    speed = data.get("speed")
    if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float)) or speed != 1):
        raise BadRequest("speed: only 1.0 is supported")
    model = data.get("model")
    engine_id = model if isinstance(model, str) and model in state.tts else state.settings.tts_engine
    engine = pick_engine(state.tts, engine_id)
    voice = data.get("voice")
    if isinstance(voice, dict):  # newer clients may send {"id": "..."}
        voice = voice.get("id")
    if voice is not None and not isinstance(voice, str):
        raise BadRequest("voice: must be a string")
    check_ready(engine)
    if voice in OPENAI_VOICES and voice not in {v.id for v in engine.voices()}:
        voice = None
    voice = resolve_voice(engine, voice or None)
    return _speech_response(request, engine, text, voice, OPENAI_RATE, Encoding.S16LE, wav=fmt == "wav", seed=None)


def tts_routes() -> list:
    """The /v1/tts socket, the speech HTTP routes and the voice routes."""
    return [
        ws_route("/v1/tts", tts_socket, access=RouteClass.CONSUME, name="tts"),
        http_route("/v1/tts", tts_http, access=RouteClass.CONSUME, methods=["POST"], name="tts_http"),
        http_route("/v1/audio/speech", openai_speech, access=RouteClass.CONSUME, methods=["POST"],
                   name="openai_speech"),
        *voice_routes(),
    ]
