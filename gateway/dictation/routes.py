"""Routes of the dictation feature: /v1/dictation and /v1/audio/transcriptions.

``WS /v1/dictation`` validates its query and capacity here, then runs a
``DictationSession`` (gateway/dictation/session.py).

``POST /v1/audio/transcriptions`` is OpenAI-compatible (multipart ``file``,
``model``, ``language``, ``response_format`` json / text / verbose_json / srt / vtt,
``timestamp_granularities[]``; what each field does: gateway/protocol/transcription.py);
the file goes through the same sidecar as
the live streams, decoded offline (VAD-filtered, beam 5). WAV, FLAC, MP3, Ogg,
WebM, M4A/MP4 and AAC are decoded by gateway/codecs/files.py, at most
``MAX_AUDIO_S`` of audio, whatever the file's header says, in a decoder process
of the lifespan's ``DecoderPool`` (gateway/codecs/decode_pool.py) whose memory
and CPU are capped.
"""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from auth.access import RouteClass, http_route, ws_route
from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from gateway.audio import AudioFormatError, AudioTooLong
from gateway.codecs.decode_pool import DecoderPool
from gateway.config import Settings
from gateway.dictation.asr_gate import asr_refusal, language_refusal
from gateway.dictation.resumable import ResumableTransport
from gateway.dictation.session import DictationSession
from gateway.dictation.transport import DictationTransport, NativeDictationTransport
from gateway.engine_view import public_model_name
from gateway.errors import BadRequest, GatewayError, TooLarge, refuse_socket
from gateway.protocol.dictation import DictationParams, parse_dictation_params
from gateway.protocol.multipart import multipart_form, read_file_field
from gateway.protocol.transcription import TranscriptionRequest, subtitles
from gateway.registry import client_label
from gateway.resume_tokens import ResumeStore, principal_owner, resume_socket

MAX_UPLOAD_BYTES = 25 * 1024 * 1024  # OpenAI's own limit
# Decoded length cap: the audio goes to the sidecar as one float32 frame at 16 kHz,
# and a frame holds at most 64 MiB (17.4 min); 15 min keeps a margin.
MAX_AUDIO_S = 15 * 60


async def dictation_socket(websocket: WebSocket) -> None:
    """``/v1/dictation``: validate the query and capacity, then run the session."""
    state = websocket.state
    settings: Settings = state.settings
    await websocket.accept()
    store: ResumeStore[ResumableTransport] = state.resume
    if "resume" in websocket.query_params:
        await resume_socket(websocket, store)
        return
    try:
        params = parse_dictation_params(websocket.query_params)
        transport = _transport(websocket, params, settings, store)
        session = DictationSession(transport, params, settings, state.asr)
    except GatewayError as exc:  # a bad query, or a decoder whose codec is missing
        await refuse_socket(websocket, exc)
        return
    try:  # a held session keeps its place: it counts against the stream limits until it ends
        await state.sessions.run_connection("dictation", websocket, session.describe, session.drain,
                                            functools.partial(refuse_socket, websocket), session.run)
    finally:
        if isinstance(transport, ResumableTransport):
            store.session_over(transport)


def _transport(websocket: WebSocket, params: DictationParams, settings: Settings,
               store: ResumeStore[ResumableTransport]) -> DictationTransport:
    if not params.resumable:
        return NativeDictationTransport(websocket)
    if settings.resume_grace_s <= 0:
        raise BadRequest("resumable: this server holds no session after a drop (VOXGATE_RESUME_GRACE_S=0); "
                         "leave it out")
    return ResumableTransport(websocket, owner=principal_owner(websocket.scope), grace_s=settings.resume_grace_s,
                              encoding=params.encoding, sample_rate=params.sample_rate, issue_token=store.issue)


async def transcriptions(request: Request) -> Response:
    """OpenAI-compatible file transcription through the same sidecar. At most
    ``max_transcriptions`` run at once (counted apart from live streams), so
    uploads cannot pile up in memory or starve the live streams' decodes; more
    get 503 + Retry-After."""
    sessions = request.state.sessions
    entry = sessions.claim("transcription", client_label(request), lambda: {"route": request.url.path})
    try:
        return await _transcribe(request)
    finally:
        sessions.remove(entry.id)


async def _transcribe(request: Request) -> Response:
    asr = request.state.asr
    refusal = asr_refusal(asr)
    if refusal is not None:
        raise refusal
    async with multipart_form(request, MAX_UPLOAD_BYTES, max_fields=20,
                              not_multipart="the body must be multipart/form-data with a 'file' field") as form:
        req = TranscriptionRequest.from_form(form, public_model_name(str(asr.info()["model"])))
        data = await read_file_field(form, "file", MAX_UPLOAD_BYTES,
                                     missing="file: missing; send the audio as a multipart file field named 'file'")
    language, response_format = req.language, req.response_format
    unsupported = language_refusal(asr, language, install_hint=False)
    if unsupported is not None:
        raise unsupported
    decoders: DecoderPool = request.state.decoders
    try:  # in a child process: a file chooses what its decode costs, so it must not cost the gateway
        decoded = await decoders.decode(data, ASR_RATE, MAX_AUDIO_S)
    except AudioTooLong as exc:
        raise TooLarge(f"file: {exc}") from None
    except AudioFormatError as exc:
        raise BadRequest(f"file: {exc}", code="bad_audio") from None
    audio = decoded.samples
    duration_s = len(audio) / ASR_RATE
    result = await asr.transcribe(audio, language=language, word_timestamps=req.words,
                                  timeout_s=60.0 + 2.0 * duration_s, prompt=req.prompt,
                                  terms=req.terms)
    if response_format == "text":
        return PlainTextResponse(result["text"] + "\n")
    if response_format in ("srt", "vtt"):
        return PlainTextResponse(subtitles(result["segments"], vtt=response_format == "vtt"),
                                 media_type="text/vtt" if response_format == "vtt" else "application/x-subrip")
    if response_format == "json":
        return JSONResponse({"text": result["text"]})
    body = {"task": "transcribe", "language": result["language"], "duration": result["duration"],
            "text": result["text"], "segments": result["segments"]}
    if req.words:
        body["words"] = result["words"]
    return JSONResponse(body)


def dictation_routes() -> list[BaseRoute]:
    return [
        ws_route("/v1/dictation", dictation_socket, access=RouteClass.CONSUME),
        http_route("/v1/audio/transcriptions", transcriptions, access=RouteClass.CONSUME, methods=["POST"]),
    ]
