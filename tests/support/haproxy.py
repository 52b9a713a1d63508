"""A real ``haproxy`` (the Debian package; scripts/setup.sh --test installs it) in
front of gateway replicas on 127.0.0.1, with a config generated per test: the
one docs/deployment.md recommends, with short health-check intervals. A server's
name is its replica's id (``VOXGATE_REPLICA_ID``), so a dictation resume goes to
the server its token's prefix names (the ``resumes`` backend)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port, stop_process, wait_until_answering

START_TIMEOUT_S = 30.0


def haproxy_config(port: int, backends: Sequence[int] | Mapping[str, int], check_interval_ms: int = 300) -> str:
    """The deployment guide's configuration, bound to 127.0.0.1:``port`` over
    ``backends``: ports, or replica ids and their ports (ports alone: g1, g2, ...)."""
    named = backends if isinstance(backends, Mapping) else {f"g{i}": p for i, p in enumerate(backends, 1)}
    servers = "\n".join(f"    server {name} 127.0.0.1:{p} check" for name, p in named.items())
    return f"""global
    maxconn 2000

defaults
    mode http
    option forwardfor
    option redispatch
    retries 3
    retry-on conn-failure empty-response response-timeout 503
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    timeout client-fin 5s

frontend voxgate
    bind 127.0.0.1:{port}
    use_backend resumes if {{ urlp(resume) -m found }}
    default_backend gateways

backend gateways
    balance leastconn
    option httpchk GET /health/ready
    http-check expect status 200
    default-server inter {check_interval_ms}ms fall 2 rise 2
{servers}

backend resumes
    balance leastconn
    option httpchk GET /health/live
    http-check expect status 200
    default-server inter {check_interval_ms}ms fall 2 rise 2
    use-server %[urlp(resume),field(1,.)] if TRUE
{servers}
"""


@dataclass
class Haproxy:
    url: str
    proc: subprocess.Popen[bytes]
    config: Path


@contextmanager
def running_haproxy(workdir: Path, backends: Sequence[int] | Mapping[str, int]) -> Iterator[Haproxy]:
    """Start haproxy over ``backends``; yields once a request through it reaches one."""
    binary = shutil.which("haproxy")
    assert binary, "haproxy is not installed: scripts/setup.sh --test installs it (Debian package haproxy)"
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "haproxy.cfg"
    config.write_text(haproxy_config(port, backends))
    check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, url + "/health/ready", START_TIMEOUT_S, "haproxy (with a ready backend)")
        yield Haproxy(url, proc, config)
    finally:
        stop_process(proc, 10)
