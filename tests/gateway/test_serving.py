"""The gateway's uvicorn configuration on a real socket: connections that never
finish their request head are dropped, the connection cap answers 503 (WebSocket
upgrades included), a known client's socket may send more than the pre-auth cap
from its first message, and a streaming POST /v1/tts whose client stopped reading
is abandoned after ``idle_timeout_s``, freeing its TTS slot and its socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.config import Settings
from gateway.serving import uvicorn_config
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import tts_app
from tests.support.net import free_port, running_config, serving
from tests.support.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

DEADLINE_S = 30.0  # far beyond every timeout configured here; only a server that never acts reaches it


def _settings(**kw: object) -> Settings:
    return Settings(engines=(), port=free_port(), log_level="warning", **kw)


def _connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed or reset the connection (data the server
    sent before is read and dropped on the way)."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


async def _wait_all_closed(socks: list[socket.socket]) -> list[bool]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        states = [_closed_by_server(s) for s in socks]
        if all(states):
            return states
        await asyncio.sleep(0.1)
    return [_closed_by_server(s) for s in socks]


async def test_connections_that_never_finish_their_request_head_are_dropped(tmp_path) -> None:
    settings = _settings(header_timeout_s=1.0)
    app = tts_app(tmp_path, FakeTtsEngine())
    async with running_config(uvicorn_config(app, settings)) as url:
        port = settings.port
        silent = [_connect(port) for _ in range(10)]
        trickling = [_connect(port) for _ in range(10)]
        for sock in trickling:
            sock.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        states = await _wait_all_closed(silent + trickling)
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            assert (await http.get("/health")).status_code == 200  # a whole request is served as before
        for sock in silent + trickling:
            sock.close()
    assert states == [True] * 20


async def test_past_the_connection_cap_requests_get_503_until_idle_sockets_are_dropped(tmp_path) -> None:
    settings = _settings(header_timeout_s=2.0, limit_concurrency=8)
    app = tts_app(tmp_path, FakeTtsEngine())
    async with serving(uvicorn_config(app, settings)) as server:
        url = f"http://127.0.0.1:{settings.port}"
        idle = [_connect(settings.port) for _ in range(8)]
        await eventually(lambda: len(server.server_state.connections) == 8, "the 8 idle connections accepted")
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            refused = await http.get("/health")
            assert await _wait_all_closed(idle) == [True] * 8
            served = await http.get("/health")
        for sock in idle:
            sock.close()
    assert (refused.status_code, refused.text) == (503, "Service Unavailable")
    assert served.status_code == 200


async def test_past_the_connection_cap_websocket_upgrades_get_503(tmp_path) -> None:
    settings = _settings(limit_concurrency=8)
    # one client may hold every socket here: the connection cap, not its share, is what refuses
    app = tts_app(tmp_path, FakeTtsEngine(), max_tts_sessions_per_client=16)
    async with running_config(uvicorn_config(app, settings)) as url:
        held, refused = [], []
        for _ in range(10):
            try:
                held.append(await connect(url.replace("http", "ws") + "/v1/tts", open_timeout=DEADLINE_S))
            except InvalidStatus as exc:
                refused.append((exc.response.status_code, exc.response.body))
        for ws in held:
            await ws.close()
        after = await connect(url.replace("http", "ws") + "/v1/tts", open_timeout=DEADLINE_S)
        await after.close()
    # as uvicorn counts HTTP requests: the new connection included, the 8th finds the limit reached
    assert (len(held), refused) == (7, [(503, b"Exceeded concurrency limit.\n")] * 3)


async def test_a_known_clients_first_message_may_exceed_the_pre_auth_cap(tmp_path) -> None:
    settings = _settings()
    app = tts_app(tmp_path, FakeTtsEngine())
    async with running_config(uvicorn_config(app, settings)) as url:
        async with connect(url.replace("http", "ws") + "/v1/tts", open_timeout=DEADLINE_S,
                           compression=None) as ws:
            await ws.send(json.dumps({"type": "text", "text": "x" * 40_000}))
            with pytest.raises(ConnectionClosed):
                while True:
                    await asyncio.wait_for(ws.recv(), DEADLINE_S)
    # read whole and judged by the socket's own limit, not refused from its header at 16 KiB
    assert (ws.close_code, ws.close_reason) == (1009, "message of 40028 bytes; the limit is 12096")


async def test_a_streaming_tts_post_whose_client_reads_nothing_is_abandoned(tmp_path) -> None:
    engine = FakeTtsEngine(frames_by_text={"endless": 100_000})  # over two hours of audio
    settings = _settings(idle_timeout_s=1.0)
    app = tts_app(tmp_path, engine, idle_timeout_s=1.0)
    async with running_config(uvicorn_config(app, settings)) as url:
        body = json.dumps({"text": "endless", "format": "pcm_s16le"}).encode()
        stalled = _connect(settings.port, rcvbuf=4096)
        stalled.send(b"POST /v1/tts HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        async with httpx.AsyncClient(base_url=url, timeout=5) as http:
            deadline = time.monotonic() + DEADLINE_S
            seen = False
            while time.monotonic() < deadline:
                sessions = (await http.get("/v1/admin/sessions")).json()["sessions"]
                seen = seen or bool(sessions)
                if seen and not sessions:
                    break
                await asyncio.sleep(0.1)
            left = (await http.get("/v1/admin/sessions")).json()["sessions"]
        closed = await _wait_all_closed([stalled])
        with contextlib.suppress(OSError):
            stalled.close()
    assert seen
    assert left == []
    assert engine.streams[0].cancelled and engine.streams[0].produced < 100_000
    assert closed == [True]
