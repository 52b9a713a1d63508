"""Core HTTP routes: /health (and its /health/ready and /health/live forms for
balancers and probes), the browser client and its static files, the engine
list, the admin session list and /metrics."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.staticfiles import StaticFiles

from auth.access import RouteClass, http_route, mount
from auth.principal import principal_of
from auth.store import AuthStore, StoreUnavailable
from gateway import __version__
from gateway.engine_view import without_server_details

STATIC_DIR = Path(__file__).resolve().parent / "static"  # packaged with gateway/, so a wheel carries it

RETRY_AFTER_STARTING_S = 2
RETRY_AFTER_DRAINING_S = 1
# A dictation stream whose recognition is this far behind its audio waits for the decoder.
ASR_QUEUED_LAG_S = 1.0


async def health(request: Request) -> Response:
    """Readiness, with the engines' states: 503 ``starting`` while engines load,
    503 ``draining`` once a stop began, else 200 ``ok``. ``/health/ready`` is
    the same answer (the name Kubernetes probes and balancers are set up with).
    Public: the state of each engine only. Details name files, directories and
    a failed process's last stderr lines, so they are for ``/v1/engines`` (consume)."""
    state = request.state
    startup = state.startup
    body: dict[str, Any] = {"version": __version__,
                            "engines": {name: {"state": e.status().state.value} for name, e in state.tts.items()}}
    if state.asr is not None:
        body["asr"] = {"state": state.asr.status().state.value}
    body["auth_store"] = await auth_store_state(state.auth.store)
    if not startup.ready:
        body = {"status": "starting", "step": startup.step, **body}
        return JSONResponse(body, status_code=503, headers={"Retry-After": str(RETRY_AFTER_STARTING_S)})
    if state.sessions.draining:
        return JSONResponse({"status": "draining", **body}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_DRAINING_S)})
    return JSONResponse({"status": "ok", **body})


async def auth_store_state(store: AuthStore) -> str:
    """``memory``, ``redis`` (answering) or ``unavailable``. Readiness does not depend
    on it: every replica shares the store, and what needs no store is still served."""
    try:
        await store.ping()
    except StoreUnavailable:
        return "unavailable"
    return "redis" if store.shared else "memory"


async def live(request: Request) -> Response:
    """Liveness: 200 whenever the event loop answers, loading and draining included
    (a restart would not help either)."""
    return JSONResponse({"status": "alive", "version": __version__})


async def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html")


async def list_engines(request: Request) -> Response:
    """Every configured engine with its state (ready / loading / missing + hint);
    the default TTS engine also says why it is the default. The detail, hint and
    reason (server paths, commands) go to admins only (gateway/engine_view.py)."""
    state = request.state
    out = []
    for name, engine in state.tts.items():
        is_default = name == state.settings.tts_engine
        entry = {"kind": "tts", "default": is_default, **engine.info().to_dict(), **engine.status().to_dict()}
        if is_default:
            entry["default_reason"] = getattr(state, "tts_default_reason", "")
        out.append(entry)
    if state.asr is not None:
        out.append({"kind": "asr", "id": "asr", **state.asr.info(), **state.asr.status().to_dict()})
    principal = principal_of(request.scope)
    if principal is None or not principal.may_admin:
        out = [without_server_details(entry) for entry in out]
    return JSONResponse({"engines": out})


async def admin_sessions(request: Request) -> Response:
    return JSONResponse({"sessions": request.state.sessions.list()})


async def metrics(request: Request) -> Response:
    """Prometheus text format: live sessions by kind, engine states, startup."""
    state = request.state
    lines = ["# HELP voxgate_sessions Live WebSocket sessions.", "# TYPE voxgate_sessions gauge"]
    for kind in ("dictation", "tts", "transcription"):
        lines.append(f'voxgate_sessions{{kind="{kind}"}} {state.sessions.count(kind)}')
    lines += ["# HELP voxgate_engine_ready 1 when the engine is ready.", "# TYPE voxgate_engine_ready gauge"]
    statuses = {name: e.status() for name, e in state.tts.items()}
    if state.asr is not None:
        statuses["asr"] = state.asr.status()
    for name, status in statuses.items():
        ready = 1 if status.state.value == "ready" else 0
        lines.append(f'voxgate_engine_ready{{engine="{name}",state="{status.state.value}"}} {ready}')
    lines += ["# HELP voxgate_started 1 once engine loading is over.", "# TYPE voxgate_started gauge",
              f"voxgate_started {1 if state.startup.ready else 0}"]
    lines += ["# HELP voxgate_draining 1 while the server drains before a stop.", "# TYPE voxgate_draining gauge",
              f"voxgate_draining {1 if state.sessions.draining else 0}"]
    store_up = await auth_store_state(state.auth.store) != "unavailable"
    lines += ["# HELP voxgate_auth_store_up 1 when the auth store (memory or Redis) answers.",
              "# TYPE voxgate_auth_store_up gauge", f"voxgate_auth_store_up {1 if store_up else 0}"]
    lines += load_metrics(state)
    lines += process_metrics(getattr(state.asr, "pid", None))
    return Response("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


def load_metrics(state: Any) -> list[str]:
    """``voxgate_load`` (live streams / capacity, per engine: what an autoscaler
    targets) and ``voxgate_queue_depth`` (work waiting for each engine: TTS
    utterances queued in sessions, dictation streams whose recognition lags)."""
    settings, sessions = state.settings, state.sessions
    live = sessions.list()
    load: dict[str, float] = {}
    depth: dict[str, int] = {}
    for name in state.tts:
        tts = [s for s in live if s["kind"] == "tts" and s.get("engine") == name]
        load[name] = len(tts) / settings.max_tts_sessions
        depth[name] = sum(int(s.get("pending_utterances", 0)) for s in tts)
    if state.asr is not None:
        streams = [s for s in live if s["kind"] == "dictation"]
        load["asr"] = len(streams) / settings.max_dictation_streams
        depth["asr"] = sum(1 for s in streams if float(s.get("lag_s", 0.0)) > ASR_QUEUED_LAG_S)
    lines = ["# HELP voxgate_load Live streams / capacity, per engine (1 = full: new ones are refused).",
             "# TYPE voxgate_load gauge"]
    lines += [f'voxgate_load{{engine="{name}"}} {value:.4g}' for name, value in load.items()]
    help_depth = ("# HELP voxgate_queue_depth Work waiting for each engine (TTS: queued utterances; "
                  f"ASR: streams over {ASR_QUEUED_LAG_S:g} s behind).")
    lines += [help_depth, "# TYPE voxgate_queue_depth gauge"]
    lines += [f'voxgate_queue_depth{{engine="{name}"}} {value}' for name, value in depth.items()]
    return lines


def _resident_bytes(pid: int | str) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def process_metrics(sidecar_pid: int | None) -> list[str]:
    """Gauges of this process (and the ASR sidecar's memory) for leak hunting; Linux
    /proc figures are left out where there is no /proc."""
    gauges: list[tuple[str, str, float | None]] = [
        ("voxgate_process_resident_bytes", "Resident memory of the gateway process.", _resident_bytes("self")),
        ("voxgate_process_open_fds", "Open file descriptors of the gateway process.",
         len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None),
        ("voxgate_process_threads", "Threads of the gateway process.", threading.active_count()),
        ("voxgate_asyncio_tasks", "Tasks alive on the gateway's event loop.", len(asyncio.all_tasks())),
        ("voxgate_asr_sidecar_resident_bytes", "Resident memory of the ASR sidecar process.",
         _resident_bytes(sidecar_pid) if sidecar_pid else None),
    ]
    lines: list[str] = []
    for name, help_text, value in gauges:
        if value is not None:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {value:g}"]
    return lines


def static_routes() -> list[BaseRoute]:
    """The browser client's files under /static (``GET /`` is a core route)."""
    return [mount("/static", StaticFiles(directory=STATIC_DIR), access=RouteClass.PUBLIC, name="static")]


def core_routes() -> list[BaseRoute]:
    return [
        http_route("/", index, access=RouteClass.PUBLIC, methods=["GET"]),
        http_route("/health", health, access=RouteClass.PUBLIC, methods=["GET"]),
        http_route("/health/ready", health, access=RouteClass.PUBLIC, methods=["GET"]),
        http_route("/health/live", live, access=RouteClass.PUBLIC, methods=["GET"]),
        http_route("/v1/engines", list_engines, access=RouteClass.CONSUME, methods=["GET"]),
        http_route("/v1/admin/sessions", admin_sessions, access=RouteClass.ADMIN, methods=["GET"]),
        http_route("/metrics", metrics, access=RouteClass.ADMIN, methods=["GET"]),
    ]
