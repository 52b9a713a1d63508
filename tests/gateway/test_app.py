"""The app factory and its lifespan: /health while engines load, core routes."""

from __future__ import annotations

import asyncio
import threading

from starlette.testclient import TestClient

from engines.base import EngineState, EngineStatus, TtsInfo
from tests.gateway.helpers import make_client
from tests.support.waiting import wait_until


class GatedEngine:
    """A TTS engine whose load() waits until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.state = EngineState.LOADING
        self.closed = False

    def info(self) -> TtsInfo:
        return TtsInfo(id="pocket", sample_rate=24000, frame_samples=1920)

    def status(self) -> EngineStatus:
        if self.state is EngineState.MISSING:
            return EngineStatus(self.state, "model.safetensors not found", "voxgate models pull pocket")
        return EngineStatus(self.state)

    async def load(self) -> None:
        await asyncio.to_thread(self.gate.wait, 30)
        self.state = EngineState.MISSING

    async def close(self) -> None:
        self.closed = True

    def voices(self):
        return []


def wait_until_ready(client: TestClient) -> dict:
    wait_until(lambda: client.get("/health").status_code == 200, "the app ready")
    return dict(client.get("/health").json())


def test_health_is_503_starting_while_engines_load_then_200(tmp_path):
    engine = GatedEngine()
    with make_client(tmp_path, tts={"pocket": engine}) as client:
        r = client.get("/health")
        assert r.status_code == 503
        assert r.headers["retry-after"] == "2"
        assert r.json()["status"] == "starting"
        assert r.json()["step"] == "loading pocket"
        assert r.json()["engines"] == {"pocket": {"state": "loading"}}
        engine.gate.set()
        body = wait_until_ready(client)
        assert body["status"] == "ok"
        # a missing model is reported, the gateway keeps serving; the public /health says
        # only the state, the details (paths, errors) are for consumers of /v1/engines
        assert body["engines"] == {"pocket": {"state": "missing"}}
        listed = client.get("/v1/engines").json()["engines"][0]
        assert (listed["state"], listed["detail"], listed["hint"]) == (
            "missing", "model.safetensors not found", "voxgate models pull pocket")
    assert engine.closed, "the lifespan closes the engines it owns"


def test_health_is_public_for_remote_clients(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}, client=("203.0.113.9", 40000)) as client:
        assert wait_until_ready(client)["status"] == "ok"


def test_engines_route_reports_state_and_hint(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}) as client:
        wait_until_ready(client)
        assert client.get("/v1/engines").json() == {"engines": [{
            "kind": "tts", "default": True, "default_reason": "Pocket TTS is enabled", "id": "pocket",
            "sample_rate": 24000, "frame_samples": 1920, "languages": ["en"], "can_clone": False, "default_voice": None,
            "options": [], "clone_uses_transcript": False, "state": "missing", "detail": "model.safetensors not found", "hint": "voxgate models pull pocket"}]}


def test_admin_sessions_is_empty_with_no_sockets(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}) as client:
        r = client.get("/v1/admin/sessions")
        assert r.status_code == 200 and r.json() == {"sessions": []}


def test_index_page_is_served(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}, client=("203.0.113.9", 40000)) as client:
        r = client.get("/")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "<title>voxgate</title>" in r.text


def test_metrics_in_prometheus_text_format(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}) as client:
        wait_until_ready(client)
        r = client.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        lines = r.text.splitlines()
        assert lines[:24] == [
            "# HELP voxgate_sessions Live WebSocket sessions.", "# TYPE voxgate_sessions gauge",
            'voxgate_sessions{kind="dictation"} 0', 'voxgate_sessions{kind="tts"} 0',
            'voxgate_sessions{kind="transcription"} 0',
            "# HELP voxgate_engine_ready 1 when the engine is ready.", "# TYPE voxgate_engine_ready gauge",
            'voxgate_engine_ready{engine="pocket",state="missing"} 0',
            "# HELP voxgate_started 1 once engine loading is over.", "# TYPE voxgate_started gauge",
            "voxgate_started 1",
            "# HELP voxgate_draining 1 while the server drains before a stop.", "# TYPE voxgate_draining gauge",
            "voxgate_draining 0",
            "# HELP voxgate_auth_store_up 1 when the auth store (memory or Redis) answers.",
            "# TYPE voxgate_auth_store_up gauge", "voxgate_auth_store_up 1",
            "# HELP voxgate_load Live streams / capacity, per engine (1 = full: new ones are refused).",
            "# TYPE voxgate_load gauge", 'voxgate_load{engine="pocket"} 0',
            "# HELP voxgate_queue_depth Work waiting for each engine (TTS: queued utterances; ASR: streams over 1 s behind).",
            "# TYPE voxgate_queue_depth gauge", 'voxgate_queue_depth{engine="pocket"} 0',
            "# HELP voxgate_process_resident_bytes Resident memory of the gateway process."]
        gauges = {line.split()[0]: float(line.split()[1]) for line in lines if not line.startswith("#")}
        assert {"voxgate_process_resident_bytes", "voxgate_process_open_fds", "voxgate_process_threads",
                "voxgate_asyncio_tasks"} <= set(gauges)
        assert gauges["voxgate_process_resident_bytes"] > 1e6 and gauges["voxgate_process_open_fds"] >= 3
        assert gauges["voxgate_process_threads"] >= 2 and gauges["voxgate_asyncio_tasks"] >= 1


def test_metrics_is_admin_only(tmp_path):
    engine = GatedEngine()
    engine.gate.set()
    with make_client(tmp_path, tts={"pocket": engine}, client=("203.0.113.9", 40000)) as client:
        r = client.get("/metrics")
        assert r.status_code == 403 and r.json() == {"detail": "loopback origin required", "code": "loopback_required"}


def test_the_piper_settings_reach_the_engine():
    from gateway.app import build_tts_engines
    from gateway.config import Settings

    piper = build_tts_engines(Settings.from_env({"VOXGATE_ENGINES": "piper", "VOXGATE_PIPER_GRAPH": "stock",
                                                 "VOXGATE_PIPER_PRECISION": "int8"}))["piper"]
    assert (piper.graph, piper.precision) == ("stock", "int8")
    assert build_tts_engines(Settings.from_env({"VOXGATE_ENGINES": "piper"}))["piper"].precision == "fp32"
