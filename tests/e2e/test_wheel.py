"""The wheel as a new user gets it: built from the tree (``pip wheel --no-deps``),
installed non-editable with its declared dependencies into a fresh venv, and
``voxgate serve`` run from there, away from the source tree, answering the
browser client's page and /health. The install is scripts/install-wheel.sh with
no extras (the core); the images' full install is tests/e2e/test_wheel_container.py."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.net import free_port, stop_process, wait_until_answering

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install-wheel.sh"
START_TIMEOUT_S = 60


def clean_env(**extra: str) -> dict[str, str]:
    """The runner's environment without VOXGATE_* or PYTHONPATH, so nothing reaches the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_") and k != "PYTHONPATH"}
    env.update(extra)
    return env


def install(venv: Path, extras: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(INSTALL), str(ROOT), str(venv)],
                          env=clean_env(VOXGATE_EXTRAS=extras, **env),
                          capture_output=True, text=True, timeout=900, check=False)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("wheel") / "venv"
    done = install(venv, "")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "voxgate 0.1.0\n"
    return venv


@contextmanager
def serve(venv: Path, cwd: Path, *args: str, **env: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([str(venv / "bin" / "voxgate"), "serve", "--host", "127.0.0.1", "--port", str(port),
                             *args], cwd=cwd, env=clean_env(VOXGATE_DATA_DIR=str(cwd / "data"), **env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, url + "/health/ready", START_TIMEOUT_S, "voxgate serve")
        yield url
    finally:
        stop_process(proc, 30)


def test_the_wheel_is_installed_not_linked_to_the_tree(venv):
    python = venv / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import gateway, auth, engines; print(gateway.__file__)"],
                           cwd="/", env=clean_env(), capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(next((venv / "lib").glob("python3*/site-packages")) / "gateway" / "__init__.py")
    (dist,) = (venv / "lib").glob("python3*/site-packages/voxgate-0.1.0.dist-info")
    direct = json.loads((dist / "direct_url.json").read_text())
    assert direct["url"].endswith("/voxgate-0.1.0-py3-none-any.whl")
    assert "dir_info" not in direct  # an editable or a directory install would say so
    version = subprocess.run([str(venv / "bin" / "voxgate"), "--version"], env=clean_env(),
                             capture_output=True, text=True, check=True)
    assert version.stdout == "voxgate 0.1.0\n"


def test_serve_from_the_wheel_answers_the_page_and_health(venv, tmp_path):
    with serve(venv, tmp_path, "--engines", "none") as url:
        page = httpx.get(url + "/")
        assert (page.status_code, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
        assert page.content == (ROOT / "gateway" / "static" / "index.html").read_bytes()
        for asset in ("js/main.js", "css/app.css", "js/pcm-worklet.js"):
            r = httpx.get(f"{url}/static/{asset}")
            assert (r.status_code, r.content) == (200, (ROOT / "gateway" / "static" / asset).read_bytes()), asset
        health = httpx.get(url + "/health")
        assert (health.status_code, health.json()) == (200, {"status": "ok", "version": "0.1.0", "engines": {},
                                                                   "auth_store": "memory"})
        assert httpx.get(url + "/health/live").json() == {"status": "alive", "version": "0.1.0"}


def test_the_installer_stops_on_an_extra_the_package_does_not_have(tmp_path):
    done = install(tmp_path / "venv", "client,ttts", TORCH_SPEC="none")
    assert done.returncode != 0
    assert "voxgate has no extra ['ttts']" in done.stderr
