"""Servers a benchmark runs as child processes: a free port, the gateway started
on it and waited for until healthy, a logged server started in its own process
group and stopped with it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEALTH_POLL_S = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gateway_env(settings: Mapping[str, str]) -> dict[str, str]:
    """This environment without its ``VOXGATE_*`` settings (so a benchmark measures
    only what it sets), importing this checkout, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(settings)
    return env


def start_gateway(serve_args: Sequence[str], env: Mapping[str, str], *, health_timeout_s: float = 90,
                  quiet_stdout: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    """``voxgate serve`` on a free port with ``serve_args``, its stderr dropped;
    returns once ``/health`` answers 200 (the process and its base URL), or kills
    it and raises ``RuntimeError`` after ``health_timeout_s``."""
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--port", str(port), *serve_args],
                            cwd=ROOT, env=dict(env), stdout=subprocess.DEVNULL if quiet_stdout else None,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + health_timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        time.sleep(HEALTH_POLL_S)
    proc.kill()
    raise RuntimeError("the gateway did not become healthy")


def start_logged(cmd: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``cmd`` in its own process group, stdout and stderr to ``log_path``."""
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process in stop()
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGTERM) -> None:
    """Send ``sig`` to the process group of ``proc``; SIGKILL it after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
