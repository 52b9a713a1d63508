"""A real `voxgate serve` process on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
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
                    start_timeout_s: float = 90.0, log: Path | None = None,
                    address_space_bytes: int | None = None) -> Iterator[GatewayProcess]:
    """Start `voxgate serve --engines ENGINES` on a free loopback port, wait for a 200
    /health, and stop it with SIGTERM (then SIGKILL) on exit. The process sees no
    VOXGATE_* variable of the test runner's, only ``env``. ``log``: a file for its
    stderr (the log), to read while it runs. ``address_space_bytes``: the process's
    RLIMIT_AS, so a test of a memory bomb cannot take the machine down."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    full_env.update({"VOXGATE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}, **(env or {}))
    stderr = subprocess.PIPE if log is None else log.open("a")
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--host", "127.0.0.1",
                             "--port", str(port), "--engines", engines],
                            cwd=ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                            preexec_fn=None if address_space_bytes is None else _limit_address_space(address_space_bytes))
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


def _limit_address_space(max_bytes: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    return limit


def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")
