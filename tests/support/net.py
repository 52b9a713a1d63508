"""Ports and a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import uvicorn


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running_server(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """Serve ``app`` with a real uvicorn on 127.0.0.1 in this event loop; yields the base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            ws_ping_interval=None)
    async with running_config(config) as url:
        yield url


@contextlib.asynccontextmanager
async def running_config(config: uvicorn.Config) -> AsyncIterator[str]:
    """Serve with ``config`` (host 127.0.0.1) in this event loop; yields the base URL."""
    async with serving(config) as server:
        yield f"http://127.0.0.1:{server.config.port}"


@contextlib.asynccontextmanager
async def serving(config: uvicorn.Config) -> AsyncIterator[uvicorn.Server]:
    """Serve with ``config`` (host 127.0.0.1) in this event loop; yields the started
    server, whose ``server_state`` tells what it holds."""
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(500):
            if server.started or task.done():
                break
            await asyncio.sleep(0.02)
        if not server.started:
            raise RuntimeError("uvicorn did not start")
        yield server
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


def wait_until_answering(proc: subprocess.Popen[str] | subprocess.Popen[bytes], url: str, timeout_s: float,
                         what: str) -> None:
    """Poll ``url`` until it answers 200 while ``proc`` (``what``) still runs; fail with
    its stderr if it exits, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr is not None else ""
            raise AssertionError(f"{what} exited {proc.returncode}: {stderr!r}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not answer 200 at {url} within {timeout_s} s"
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen[Any], timeout_s: float) -> Any:
    """SIGTERM ``proc`` and reap it, SIGKILL it when it has not ended within
    ``timeout_s``; its stderr when that is a pipe (else None)."""
    proc.terminate()
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    return stderr
