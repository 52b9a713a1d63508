"""The app factory. ``create_app(settings)`` returns a Starlette app whose lifespan
owns every resource: auth state, session registry, engines, the ASR sidecar,
the upload decoder processes.

The lifespan yields its resources as Starlette lifespan *state*; routes and the
auth middleware read them from ``scope["state"]`` (``request.state``), never from
module globals. Engines load in background tasks owned by the lifespan, so
``/health`` answers 503 ``starting`` at once and 200 when loading is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from auth import AuthMiddleware, AuthState, ShareListener, auth_routes
from auth.access import make_classifier
from auth.store import AuthStore
from engines.base import AsrService, EngineStatus, TtsEngine
from gateway import __version__
from gateway.admission import AdmissionMiddleware, PendingSockets
from gateway.child_env import child_environment
from gateway.codecs.decode_pool import DecodeLimits, DecoderPool
from gateway.config import Settings
from gateway.dictation.resumable import KEPT_PER_STREAM
from gateway.dictation.routes import dictation_routes
from gateway.drain import Drainer
from gateway.engine_notice import ASR_ENGINE, EngineLog
from gateway.errors import GatewayError
from gateway.fronts.deepgram.routes import deepgram_routes
from gateway.fronts.elevenlabs.routes import elevenlabs_routes
from gateway.fronts.flux.routes import flux_routes
from gateway.fronts.openai_realtime.routes import openai_realtime_routes
from gateway.http_api import core_routes, static_routes
from gateway.registry import SessionRegistry
from gateway.resume_tokens import ResumeStore
from gateway.startup import Startup
from gateway.tts.resumable import KEPT_PER_SESSION
from gateway.tts.routes import tts_routes
from gateway.tts.sentences import SentenceBuffer

log = logging.getLogger("voxgate")


def build_tts_engines(settings: Settings) -> dict[str, TtsEngine]:
    """The TTS engines named in ``settings.engines``, not yet loaded."""
    engines: dict[str, TtsEngine] = {}
    if "pocket" in settings.engines:
        from engines.pocket.engine import PocketEngine

        engines["pocket"] = PocketEngine(
            model_dir=settings.pocket_model_dir,
            voices_dir=settings.voices_dir / "pocket",
            quantize=settings.pocket_quantize,
            decoder_precision=settings.pocket_decoder_precision,
            threads=settings.tts_threads,
        )
    if "omnivoice" in settings.engines:
        from engines.omnivoice.backend import LoadSpec
        from engines.omnivoice.engine import OmniVoiceEngine

        engines["omnivoice"] = OmniVoiceEngine(
            LoadSpec(model=settings.omnivoice_model_ref, device=settings.device,
                     asr_model=settings.omnivoice_asr_model or None, num_step=settings.omnivoice_steps),
            voices_dir=settings.voices_dir / "omnivoice",
            cache_dir=settings.data_dir / "cache" / "omnivoice-prompts",
            idle_unload_s=settings.omnivoice_idle_s,
            max_streams=settings.omnivoice_max_streams,
            split_sentences=speech_units,
        )
    if "piper" in settings.engines:
        from engines.piper.engine import PiperEngine

        engines["piper"] = PiperEngine(voice_dirs=settings.piper_voices, threads=settings.piper_threads,
                                       graph=settings.piper_graph, precision=settings.piper_precision)
    return engines


def speech_units(text: str) -> list[str]:
    """``text`` cut as a session's text buffer cuts it: sentences, and run-ons at clause breaks."""
    buffer = SentenceBuffer(max_chars=len(text) + 1)
    units = buffer.append(text)
    rest = buffer.flush()
    return [*units, rest] if rest else units


POCKET_WEIGHTS = "model.safetensors"  # the file engines/pocket/model.py loads


def default_tts_engine(settings: Settings, engines: Collection[str]) -> tuple[str, str]:
    """The TTS engine for requests that name none, and why. ``auto`` keeps Pocket
    when its weights are on disk and falls back to Piper, which needs no download."""
    if settings.tts_engine != "auto":
        return settings.tts_engine, "set by VOXGATE_TTS_ENGINE"
    weights = settings.pocket_model_dir / POCKET_WEIGHTS
    if "pocket" in engines and ("piper" not in engines or weights.is_file()):
        return "pocket", "Pocket TTS is enabled" + (" and its weights are on disk" if weights.is_file() else "")
    if "piper" in engines:
        reason = (f"Pocket TTS weights not found at {weights} (voxgate models pull pocket)" if "pocket" in engines
                  else "Pocket TTS is not enabled")
        return "piper", reason
    if "omnivoice" in engines:
        return "omnivoice", "the only TTS engine enabled"
    return "pocket", "no TTS engine is enabled"


def build_asr(settings: Settings) -> AsrService | None:
    """The ASR sidecar supervisor, or None when ASR is not enabled."""
    if "asr" not in settings.engines:
        return None
    from gateway.dictation.sidecar import AsrSupervisor

    # The sidecar needs none of the gateway's secrets (the API key above all).
    return AsrSupervisor.from_settings(settings, env=child_environment(settings.environ))


def build_decoders(settings: Settings) -> DecoderPool:
    """The upload decoder processes: one per concurrent transcription, started on first use."""
    return DecoderPool(DecodeLimits(memory_mb=settings.decode_memory_mb, cpu_s=settings.decode_cpu_s),
                       size=settings.max_transcriptions, env=child_environment(settings.environ))


def build_auth_store(settings: Settings) -> AuthStore | None:
    """Redis when ``VOXGATE_REDIS_URL`` is set (replicas share the auth state), else
    None: the auth state keeps its own memory store."""
    if not settings.redis_url:
        return None
    from auth.store_redis import RedisStore

    store = RedisStore(settings.redis_url, settings.redis_prefix)
    log.info("auth state in Redis at %s (prefix %r)", store.where, settings.redis_prefix)
    return store


def create_app(
    settings: Settings,
    *,
    tts_engines: Mapping[str, TtsEngine] | None = None,
    asr: AsrService | None = None,
    share_listener: ShareListener | None = None,
) -> Starlette:
    """Build the ASGI app. Tests may inject engines, an ASR supervisor or a share
    listener; by default they are built from ``settings``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        engines = dict(tts_engines) if tts_engines is not None else build_tts_engines(settings)
        default_tts, default_reason = default_tts_engine(settings, engines)
        app_settings = settings.replace(tts_engine=default_tts)
        asr_service = asr if asr is not None else build_asr(settings)
        listener: ShareListener
        if share_listener is not None:
            listener = share_listener
        else:
            from gateway.lan_share import UvicornShareListener

            listener = UvicornShareListener(settings)
        auth_state = AuthState(settings.auth_config(), share_listener=listener, store=build_auth_store(settings))
        sessions = SessionRegistry.for_settings(settings)
        startup = Startup()
        state: dict[str, Any] = {
            "settings": app_settings,
            "tts_default_reason": default_reason,
            "auth": auth_state,
            "sessions": sessions,
            "tts": engines,
            "asr": asr_service,
            "startup": startup,
            "drain": Drainer(sessions, settings.drain_s),
            "resume": ResumeStore(settings.resume_grace_s, KEPT_PER_STREAM * settings.max_dictation_streams,
                                  replica=settings.replica),
            "tts_resume": ResumeStore(settings.resume_grace_s, KEPT_PER_SESSION * settings.max_tts_sessions,
                                      replica=settings.replica),
            "decoders": build_decoders(settings),
        }
        if hasattr(listener, "bind_state"):
            listener.bind_state(state)
        loader = asyncio.create_task(_load_and_watch(startup, engines, asr_service), name="engine-loader")
        wyoming = None
        try:
            if app_settings.wyoming_uri:
                from gateway.fronts.wyoming.server import WyomingServer
                from gateway.lan_share import primary_lan_ipv4

                wyoming = WyomingServer(app_settings, state, version=__version__, lan_ipv4=primary_lan_ipv4)
                await wyoming.start()
                state["wyoming"] = wyoming
            yield state
        finally:
            if wyoming is not None:
                await wyoming.aclose()
            loader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await loader
            await auth_state.aclose()
            await state["decoders"].aclose()
            if asr_service is not None:
                await asr_service.aclose()
            for engine in engines.values():
                with contextlib.suppress(Exception):
                    await engine.close()

    routes: list[BaseRoute] = [*core_routes(), *auth_routes(), *tts_routes(), *dictation_routes(),
                               *deepgram_routes(), *flux_routes(), *openai_realtime_routes(),
                               *elevenlabs_routes(), *static_routes()]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={GatewayError: _gateway_error_response})
    # added first, so it runs inside the auth middleware, which has judged the client by then
    app.add_middleware(AdmissionMiddleware, pending=PendingSockets(settings.pending_sockets,
                                                                   settings.pending_sockets_per_client))
    app.add_middleware(AuthMiddleware, classify=make_classifier(routes))
    return app


async def _gateway_error_response(request: Request, exc: Exception) -> Response:
    """Every GatewayError raised by an HTTP route becomes its JSON response here."""
    assert isinstance(exc, GatewayError)
    return exc.to_response()


async def _load_and_watch(startup: Startup, engines: Mapping[str, TtsEngine], asr_service: AsrService | None) -> None:
    """Load the engines, then log each one's detail and hint whenever its status changes
    (a client is told only its state, gateway/engine_notice.py)."""
    await _load_engines(startup, engines, asr_service)

    def statuses() -> dict[str, EngineStatus]:
        out = {name: engine.status() for name, engine in engines.items()}
        if asr_service is not None:
            out[ASR_ENGINE] = asr_service.status()
        return out

    await EngineLog().watch(statuses)


async def _load_engines(startup: Startup, engines: Mapping[str, TtsEngine], asr_service: AsrService | None) -> None:
    """Load every engine, one after the other (they share 2 cores), reporting the step."""
    try:
        if asr_service is not None:
            startup.step = "starting ASR sidecar"
            await asr_service.start()
        for name, engine in engines.items():
            startup.step = f"loading {name}"
            await engine.load()
            status = engine.status()
            log.info("engine %s: %s%s", name, status.state.value, f" ({status.detail})" if status.detail else "")
    except Exception:  # an engine's load() must not raise; if one does, keep serving
        log.exception("engine loading failed")
    finally:
        startup.done()
