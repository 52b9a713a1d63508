"""A real ``redis-server`` (the Debian package; scripts/setup.sh --test installs it)
on 127.0.0.1 and a free port, with no persistence, for the tests that need one."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port, stop_process

START_TIMEOUT_S = 20.0


@dataclass
class RedisServer:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args: str) -> str:
        """``redis-cli`` against this server; its output."""
        done = subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True,
                              timeout=10, check=True)
        return done.stdout.strip()

    def stored_strings(self, pattern: str = "*") -> list[str]:
        """Every key matching ``pattern``, and every value, field, member and score stored
        under them (strings, hashes, sorted sets)."""
        found: list[str] = []
        for key in sorted(filter(None, self.cli("--scan", "--pattern", pattern).splitlines())):
            found.append(key)
            kind = self.cli("TYPE", key)
            if kind == "string":
                found.append(self.cli("GET", key))
            elif kind == "hash":
                found.extend(self.cli("HGETALL", key).splitlines())
            elif kind == "zset":
                found.extend(self.cli("ZRANGE", key, "0", "-1", "WITHSCORES").splitlines())
            else:
                raise AssertionError(f"{key} is a {kind}, which stored_strings does not read")
        return found

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@contextmanager
def running_redis(workdir: Path, port: int | None = None) -> Iterator[RedisServer]:
    """Start redis-server, wait until it answers PING, stop it on exit."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed: scripts/setup.sh --test installs it (Debian package redis-server)"
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir), "--protected-mode", "yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(port, proc)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, f"redis-server exited {proc.returncode}"
            try:
                if server.cli("PING") == "PONG":
                    break
            except subprocess.CalledProcessError:
                pass
            assert time.monotonic() < deadline, "redis-server did not answer PING"
            time.sleep(0.05)
        yield server
    finally:
        if proc.poll() is None:
            stop_process(proc, 10)
