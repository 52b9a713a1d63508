"""Voice routes: ``GET /v1/voices`` (consume), admin ``POST /v1/voices`` (clone a
voice from an uploaded WAV) and admin ``DELETE /v1/voices/{id}``.

An uploaded WAV is checked (size, format, duration) before any engine sees it,
kept under ``<data_dir>/voices/uploads/<engine>/<id>.wav`` (written to a
temporary file, fsynced, then renamed, so a crash never leaves half a file),
and handed to the engine, which keeps its own form of the voice.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from auth.access import RouteClass, http_route
from engines.base import CloneRefused, EngineError
from engines.files import write_bytes_atomically
from gateway.audio import AudioFormatError, read_wav
from gateway.errors import BadRequest, GatewayError
from gateway.protocol.multipart import multipart_form, read_file_field
from gateway.tts.selection import check_ready, gateway_error, pick_engine, voice_ids, voice_not_found

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MIN_CLONE_S = 1.0
MAX_CLONE_S = 30.0
MAX_REF_TEXT_CHARS = 1000
CLONE_FIELDS = ("id", "file", "engine", "ref_text")
VOICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


async def list_voices(request: Request) -> Response:
    """Voices per engine (``?engine=`` narrows to one) and each engine's default."""
    engines = request.state.tts
    wanted = request.query_params.get("engine")
    if wanted is not None and wanted not in engines:
        pick_engine(engines, wanted)  # raises the unknown-engine error
    voices: list[dict[str, Any]] = []
    defaults: dict[str, str | None] = {}
    for name, engine in engines.items():
        if wanted is not None and name != wanted:
            continue
        defaults[name] = engine.info().default_voice
        try:
            voices.extend(v.to_dict() for v in engine.voices())
        except EngineError:  # an engine that is not loaded has no voices to list yet
            continue
    return JSONResponse({"voices": voices, "defaults": defaults})


async def add_voice(request: Request) -> Response:
    """Clone a voice: multipart form with ``id``, ``file`` (WAV, 1-30 s), optional ``engine`` and
    optional ``ref_text`` (what the clip says; OmniVoice needs it unless it can transcribe the clip; an
    engine whose cloning takes no transcript, Pocket, refuses it)."""
    state = request.state
    not_multipart = "body: send multipart/form-data with the fields id and file (a WAV)"
    async with multipart_form(request, MAX_UPLOAD_BYTES, max_fields=8, not_multipart=not_multipart) as form:
        unknown = sorted(set(form.keys()) - set(CLONE_FIELDS))
        if unknown:
            raise BadRequest(f"{unknown[0][:40]}: not a field of this form; the fields are: {', '.join(CLONE_FIELDS)}")
        voice_id = form.get("id")
        if not isinstance(voice_id, str) or not VOICE_ID.match(voice_id):
            raise BadRequest("id: required, 1-64 characters of letters, digits, '_' or '-', starting with a letter "
                             "or digit")
        engine_field = form.get("engine")
        engine_id = engine_field if isinstance(engine_field, str) and engine_field else state.settings.tts_engine
        ref_field = form.get("ref_text")
        if ref_field is not None and not isinstance(ref_field, str):
            raise BadRequest("ref_text: must be a text field (the words spoken in the clip)")
        ref_text = ref_field.strip() if ref_field else None
        if ref_text is not None and len(ref_text) > MAX_REF_TEXT_CHARS:
            raise BadRequest(f"ref_text: {len(ref_text)} characters; the limit is {MAX_REF_TEXT_CHARS}")
        data = await read_file_field(form, "file", MAX_UPLOAD_BYTES, missing="file: required, a WAV file")
    try:
        samples, rate = read_wav(data)
    except AudioFormatError as exc:
        raise BadRequest(f"file: {exc}") from None
    duration = len(samples) / rate
    if not MIN_CLONE_S <= duration <= MAX_CLONE_S:
        raise BadRequest(f"file: {duration:.2f} s of audio; a voice sample must be {MIN_CLONE_S:g} to "
                         f"{MAX_CLONE_S:g} s long")
    engine = pick_engine(state.tts, engine_id)
    check_ready(engine)
    info = engine.info()
    if not info.can_clone:
        raise BadRequest(f"engine {engine_id} cannot clone voices", code="clone_unsupported")
    if ref_text and not info.clone_uses_transcript:
        raise BadRequest(f"ref_text: the {info.id} engine clones a voice from the audio alone and takes no "
                         "transcript; leave ref_text out")
    if voice_id in voice_ids(engine):
        raise GatewayError(f"id: voice {voice_id!r} already exists; delete it first or choose another id",
                           code="voice_exists")
    path = upload_path(state.settings.voices_dir, engine_id, voice_id)
    await asyncio.to_thread(write_bytes_atomically, path, data)
    try:
        # Only when given: an engine that clones from the audio alone is called without it.
        voice = await (engine.clone_voice(voice_id, data, transcript=ref_text) if ref_text
                       else engine.clone_voice(voice_id, data))
    except CloneRefused as exc:
        await asyncio.to_thread(_unlink, path)
        raise BadRequest(str(exc), code="clone_unsupported") from None
    except EngineError as exc:
        await asyncio.to_thread(_unlink, path)
        raise gateway_error(exc) from None
    return JSONResponse({"voice": voice.to_dict()}, status_code=201)


async def delete_voice(request: Request) -> Response:
    """Remove a cloned voice (``?engine=`` when it is not the default engine's)."""
    state = request.state
    voice_id = request.path_params["voice_id"]
    engine = pick_engine(state.tts, request.query_params.get("engine") or state.settings.tts_engine)
    check_ready(engine)
    voices = {v.id: v for v in engine.voices()}
    voice = voices.get(voice_id)
    if voice is None:
        raise voice_not_found(voice_id, sorted(voices))
    if voice.source != "cloned":
        raise BadRequest(f"voice {voice_id!r} is built in; only cloned voices can be deleted",
                         code="voice_builtin")
    try:
        await engine.delete_voice(voice_id)
    except EngineError as exc:
        raise gateway_error(exc) from None
    await asyncio.to_thread(_unlink, upload_path(state.settings.voices_dir, engine.info().id, voice_id))
    return Response(status_code=204)


def upload_path(voices_dir: Path, engine_id: str, voice_id: str) -> Path:
    return voices_dir / "uploads" / engine_id / f"{voice_id}.wav"


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


def voice_routes() -> list[BaseRoute]:
    return [
        http_route("/v1/voices", list_voices, access=RouteClass.CONSUME, methods=["GET"], name="voices"),
        http_route("/v1/voices", add_voice, access=RouteClass.ADMIN, methods=["POST"], name="add_voice"),
        http_route("/v1/voices/{voice_id}", delete_voice, access=RouteClass.ADMIN, methods=["DELETE"],
                   name="delete_voice"),
    ]
