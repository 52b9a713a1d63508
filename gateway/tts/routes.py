"""Routes of the TTS feature: the /v1/tts socket and the speech HTTP routes.

- ``WS /v1/tts``: a ``TtsSession`` per socket (gateway/tts/session.py); with
  ``resumable=true`` it outlives a dropped socket (gateway/tts/resumable.py).
- ``POST /v1/tts``: JSON in, chunked streaming audio out (WAV, PCM, MP3, Opus, AAC, FLAC, G.711).
- ``POST /v1/audio/speech``: the OpenAI speech request and response formats (MP3 by default).
- the voice routes live in gateway/tts/voices.py.

Bodies are parsed by their request shapes (gateway/protocol/tts_http.py); every
route is declared with its access class, which the auth middleware enforces.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from auth.access import RouteClass, http_route, ws_route
from engines.base import TtsEngine
from gateway.codecs.formats import OutputFormat
from gateway.codecs.pyav import load_av
from gateway.config import Settings
from gateway.errors import BadRequest, GatewayError, refuse_socket
from gateway.protocol.json import read_json_object
from gateway.protocol.tts import Ready, TextLimits, parse_tts_params
from gateway.protocol.tts_http import SpeechRequest, SynthesisRequest
from gateway.registry import client_label, client_share
from gateway.resume_tokens import ResumeStore, principal_owner, resume_socket
from gateway.streaming import StallGuardedResponse
from gateway.tts.frames import AudioBytes, open_audio
from gateway.tts.openai_speech import SSE_MEDIA_TYPE, engine_for_model, openai_voice, speech_options, sse_events
from gateway.tts.resumable import ResumableTtsTransport
from gateway.tts.selection import check_ready, pick_engine, resolve_voice
from gateway.tts.session import TtsSession
from gateway.tts.states import SessionConfig
from gateway.tts.transport import NativeTtsTransport, TtsTransport
from gateway.tts.voices import voice_routes

log = logging.getLogger("voxgate.tts")

TEXT_LIMITS = TextLimits()
OPENAI_RATE = 24000  # OpenAI's audio is 24 kHz mono in every format (pcm: 16-bit)
PCM_OUTPUTS = (OutputFormat.PCM_S16LE, OutputFormat.PCM_F32LE)
BodyWrapper = Callable[[AsyncIterable[bytes]], AsyncIterator[bytes]]


# ---- the socket


async def tts_socket(websocket: WebSocket) -> None:
    """``/v1/tts``: validate the query, check the engine, voice and capacity, then run the
    session; ``?resume=``: continue a held one (gateway/resume_tokens.py)."""
    state = websocket.state
    settings = state.settings
    await websocket.accept()
    store: ResumeStore[ResumableTtsTransport] = state.tts_resume
    if "resume" in websocket.query_params:
        await resume_socket(websocket, store)
        return
    try:
        params = parse_tts_params(websocket.query_params, settings.tts_engine)
        engine = pick_engine(state.tts, params.engine)
        check_ready(engine)
        voice = resolve_voice(engine, params.voice)
        transport = _transport(websocket, params.resumable, settings, store)
    except GatewayError as exc:
        await refuse_socket(websocket, exc)
        return
    info = engine.info()
    rate = params.sample_rate or params.encoding.default_rate(info.sample_rate)
    if params.encoding.needs_av:
        try:
            load_av()  # here, so a server without FFmpeg refuses the socket instead of failing mid-utterance
        except GatewayError as exc:
            await refuse_socket(websocket, exc)
            return
    resumable = transport if isinstance(transport, ResumableTtsTransport) else None
    session = TtsSession(transport=transport, engine=engine, voice=voice, sample_rate=rate, encoding=params.encoding,
                         config=SessionConfig(limits=TEXT_LIMITS, idle_timeout_s=settings.idle_timeout_s),
                         away=(lambda: resumable.away) if resumable is not None else lambda: False)

    async def run(session_id: str, _release: Callable[[], None]) -> None:
        ready = Ready(engine=info.id, voice=voice, sample_rate=session.sample_rate, encoding=params.encoding.value,
                      frame_samples=info.frame_samples, session=session_id).to_dict()
        if resumable is not None:
            await resumable.send_ready(ready)
        else:
            await websocket.send_json(ready)
        await session.run()

    try:  # a held session keeps its place: it counts against the session limits until it ends
        await state.sessions.run_connection("tts", websocket, session.describe, session.drain,
                                            functools.partial(refuse_socket, websocket), run)
    finally:
        if resumable is not None:
            store.session_over(resumable)


def _transport(websocket: WebSocket, resumable: bool, settings: Settings,
               store: ResumeStore[ResumableTtsTransport]) -> TtsTransport:
    if not resumable:
        return NativeTtsTransport(websocket, TEXT_LIMITS)
    if settings.resume_grace_s <= 0:
        raise BadRequest("resumable: this server holds no session after a drop (VOXGATE_RESUME_GRACE_S=0); "
                         "leave it out")
    return ResumableTtsTransport(websocket, TEXT_LIMITS, owner=principal_owner(websocket.scope),
                                 grace_s=settings.resume_grace_s, stall_s=settings.idle_timeout_s / 2,
                                 issue_token=store.issue)


# ---- HTTP speech


def speech_response(request: Request, engine: TtsEngine, text: str, voice: str | None, rate: int,
                    fmt: OutputFormat, seed: int | None, options: dict[str, str] | None = None,
                    wrap: tuple[BodyWrapper, str] | None = None) -> Response:
    """Register the request as a TTS session and stream its audio, each piece as it is encoded
    (the speech routes of the fronts answer with it too); ``wrap``: a framing of the
    audio bytes and its media type (OpenAI's server-sent events)."""
    sessions = request.state.sessions
    audio: AudioBytes | None = None
    entry = sessions.claim("tts", client_label(request), lambda: {
        "engine": engine.info().id, "voice": voice, "route": request.url.path, "sample_rate": rate,
        "format": fmt.value, "audio_s_sent": round((audio.samples if audio else 0) / rate, 3)},
        share=client_share(request))

    try:
        audio = open_audio(engine, text, voice, rate, fmt, seed, options)
    except BaseException:
        sessions.remove(entry.id)
        raise
    stream = audio
    framed = wrap[0](stream) if wrap is not None else stream

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in framed:
                yield chunk
        except GatewayError as exc:  # the status line is gone: the stream just ends short
            log.warning("TTS HTTP stream ended early: %s", exc.message)
        finally:
            await cleanup()

    async def cleanup() -> None:  # after the body, or instead of it when the client left first
        close_framing = getattr(framed, "aclose", None) if framed is not stream else None
        if close_framing is not None:
            await close_framing()
        await stream.aclose()
        sessions.remove(entry.id)

    media_type = f"audio/pcm;rate={rate};encoding={fmt.value}" if fmt in PCM_OUTPUTS else fmt.media_type
    if wrap is not None:
        media_type = wrap[1]
    headers = {"X-Sample-Rate": str(rate), "X-Encoding": fmt.value, "Cache-Control": "no-store"}
    return StallGuardedResponse(body(), media_type=media_type, headers=headers, background=BackgroundTask(cleanup),
                                stall_timeout_s=request.state.settings.idle_timeout_s)


async def tts_http(request: Request) -> Response:
    """``POST /v1/tts``: ``{"text","voice","engine","format","sample_rate","seed"}`` -> streaming audio."""
    state = request.state
    req = SynthesisRequest.from_dict(await read_json_object(request, TEXT_LIMITS.max_message_bytes), TEXT_LIMITS)
    engine = pick_engine(state.tts, req.engine or state.settings.tts_engine)
    check_ready(engine)
    voice = resolve_voice(engine, req.voice)
    rate = req.sample_rate or req.format.default_rate(engine.info().sample_rate)
    return speech_response(request, engine, req.text, voice, rate, req.format, seed=req.seed,
                           options=req.engine_options())


async def openai_speech(request: Request) -> Response:
    """``POST /v1/audio/speech``: OpenAI-compatible (``model``, ``input``, ``voice``, ``instructions``,
    ``response_format`` mp3 (the default), opus, aac, flac, wav or pcm, ``speed`` 1.0, ``stream_format``
    audio or sse); 24 kHz mono like OpenAI's. What each field does: gateway/tts/openai_speech.py."""
    state = request.state
    req = SpeechRequest.from_dict(await read_json_object(request, TEXT_LIMITS.max_message_bytes), TEXT_LIMITS)
    engine = pick_engine(state.tts, engine_for_model(state.tts, req.model, state.settings.tts_engine))
    check_ready(engine)
    voice = resolve_voice(engine, openai_voice(engine, req.voice))
    options = speech_options(state.tts, engine, req.instructions)
    wrap = (sse_events, SSE_MEDIA_TYPE) if req.stream_format == "sse" else None
    return speech_response(request, engine, req.input, voice, OPENAI_RATE, req.output, seed=None, options=options,
                           wrap=wrap)


def tts_routes() -> list[BaseRoute]:
    """The /v1/tts socket, the speech HTTP routes and the voice routes."""
    return [
        ws_route("/v1/tts", tts_socket, access=RouteClass.CONSUME, name="tts"),
        http_route("/v1/tts", tts_http, access=RouteClass.CONSUME, methods=["POST"], name="tts_http"),
        http_route("/v1/audio/speech", openai_speech, access=RouteClass.CONSUME, methods=["POST"],
                   name="openai_speech"),
        *voice_routes(),
    ]
