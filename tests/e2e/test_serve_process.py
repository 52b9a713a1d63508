"""`voxgate serve` as a real process: startup, /health, refusal of an unsafe bind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.net import stop_process

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    env.update({"VOXGATE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}, **extra)
    return env


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_healthy(url: str, proc: subprocess.Popen) -> httpx.Response:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {proc.stderr.read()}")
        try:
            r = httpx.get(url + "/health", timeout=2)
            if r.status_code == 200:
                return r
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("server did not become healthy")


def stop(proc: subprocess.Popen) -> str:
    return stop_process(proc, 20)  # its stderr, a text pipe


@pytest.mark.slow
def test_serve_answers_health_and_prints_a_banner(tmp_path, free_port):
    proc = start(["--host", "127.0.0.1", "--port", str(free_port), "--engines", "none"], serve_env(tmp_path))
    try:
        r = wait_healthy(f"http://127.0.0.1:{free_port}", proc)
        assert r.json()["status"] == "ok"
        assert r.json()["engines"] == {}
    finally:
        err = stop(proc)
    assert f"voxgate 0.1.0 on http://127.0.0.1:{free_port}/" in err
    assert "  mode:        local" in err
    assert "  credentials: loopback clients" in err
    assert "  engines:     none (loading in the background; GET /health)" in err
    # SIGTERM is a graceful shutdown: the lifespan ends, then uvicorn re-raises the signal
    assert "Application shutdown complete." in err
    assert proc.returncode in (0, -15)


@pytest.mark.slow
def test_serve_refuses_a_public_bind_without_credentials(tmp_path, free_port):
    proc = start(["--host", "0.0.0.0", "--port", str(free_port), "--engines", "none"], serve_env(tmp_path))
    _, err = proc.communicate(timeout=START_TIMEOUT_S)
    assert proc.returncode == 2
    assert err.startswith("voxgate: refusing to start: ")
    for option in ("VOXGATE_API_KEY", "VOXGATE_TRUSTED_NETWORKS", "--allow-anonymous"):
        assert option in err
    assert "Uvicorn running" not in err


@pytest.mark.slow
def test_serve_with_a_bad_setting_names_it(tmp_path):
    proc = start(["--engines", "none"], serve_env(tmp_path, VOXGATE_PORT="eighty"))
    _, err = proc.communicate(timeout=START_TIMEOUT_S)
    assert proc.returncode == 2
    assert err.strip() == "voxgate: configuration error: VOXGATE_PORT='eighty' is not an integer"


@pytest.mark.slow
def test_key_from_a_file_is_used_and_never_logged(tmp_path, free_port):
    key = "vg-test-key-5d1c0a77e3-Rw8nT2"
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    proc = start(["--host", "127.0.0.1", "--port", str(free_port), "--engines", "none",
                  "--api-key-file", str(key_file), "--log-level", "debug"], serve_env(tmp_path))
    try:
        wait_healthy(f"http://127.0.0.1:{free_port}", proc)
        with httpx.Client(base_url=f"http://127.0.0.1:{free_port}") as c:
            assert c.get("/v1/engines", headers={"Authorization": f"Bearer {key}"}).status_code == 200
            assert c.get("/v1/engines", params={"api_key": key}).status_code == 200
    finally:
        err = stop(proc)
    assert "API key (from file)" in err
    assert key not in err


SHORT_KEY_ERROR = (
    "voxgate: configuration error: the API key in {where} has 12 characters; an API key needs at least 24 "
    "(make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'). Set a longer "
    "VOXGATE_API_KEY or VOXGATE_API_KEY_FILE, or VOXGATE_ALLOW_SHORT_API_KEY=1 to start with this one anyway")


@pytest.mark.slow
def test_serve_refuses_a_short_key_from_the_env_or_a_file(tmp_path, free_port):
    key = "short-Kx7q2m"
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    for args, env, where in (([], {"VOXGATE_API_KEY": key}, "VOXGATE_API_KEY"),
                             (["--api-key-file", str(key_file)], {}, f"VOXGATE_API_KEY_FILE={str(key_file)!r}")):
        proc = start(["--port", str(free_port), "--engines", "none", *args], serve_env(tmp_path, **env))
        _, err = proc.communicate(timeout=START_TIMEOUT_S)
        assert (proc.returncode, err.strip()) == (2, SHORT_KEY_ERROR.format(where=where))
        assert key not in err


@pytest.mark.slow
def test_serve_starts_with_a_short_key_when_allowed_and_warns(tmp_path, free_port):
    key = "short-Kx7q2m"
    proc = start(["--port", str(free_port), "--engines", "none"],
                 serve_env(tmp_path, VOXGATE_API_KEY=key, VOXGATE_ALLOW_SHORT_API_KEY="1", VOXGATE_SERVER_MODE="1"))
    try:
        wait_healthy(f"http://127.0.0.1:{free_port}", proc)
        r = httpx.get(f"http://127.0.0.1:{free_port}/v1/engines", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200
    finally:
        err = stop(proc)
    assert ("WARNING voxgate.auth: auth: the API key has fewer than 24 characters "
            "(allowed by VOXGATE_ALLOW_SHORT_API_KEY); use a longer one") in err
    assert key not in err
