"""A real `voxgate serve` process on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port, wait_until_answering

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class GatewayProcess:
    url: str
    proc: subprocess.Popen


@contextmanager
def running_gateway(data_dir: Path, engines: str, env: dict[str, str] | None = None,
                    start_timeout_s: float = 90.0, log: Path | None = None) -> Iterator[GatewayProcess]:
    """Start `voxgate serve --engines ENGINES` on a free loopback port, wait for a 200
    /health, and stop it with SIGTERM (then SIGKILL) on exit. The process sees no
    VOXGATE_* variable of the test runner's, only ``env``. ``log``: a file for its
    stderr (the log), to read while it runs."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    full_env.update({"VOXGATE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}, **(env or {}))
    stderr = subprocess.PIPE if log is None else log.open("a")
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--engines", engines],
                            cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    if log is not None:
        stderr.close()  # the process has its own copy
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, url + "/health", start_timeout_s, f"gateway (--engines {engines})")
        yield GatewayProcess(url, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
