"""Before a client is known, nothing big is read and few sockets are held: a real
`voxgate serve` process (no engine) with an API key, every client remote through
a trusted proxy on 127.0.0.1, and the ``websockets`` client on ElevenLabs'
sockets, whose key may come in the first message.

- a 16 MiB nested-JSON first message with no credential is refused 1009 from its
  frame header: the process's peak memory barely moves;
- WebSocket upgrades count against ``VOXGATE_LIMIT_CONCURRENCY`` (503 past it);
- sockets waiting for their credential are capped per client address and in all
  (1013 past either), and wait ``VOXGATE_AUTH_WAIT_S`` at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.e2e.gateway_process import GatewayProcess, peak_rss_bytes, running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

KEY = "vgk-admission-e2e-key-5c1f0a9d7e3b"
PATH = "/v1/text-to-speech/v1d/stream-input"
BASE_ENV = {"VOXGATE_API_KEY": KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32"}
BOMB_BYTES = 16 * 1024 * 1024 - 64  # just within the server's largest message
WAIT_S = 30.0  # bounds every wait below; only a server that never answers reaches it
ADDRESS_SPACE = 6 * 1024**3
# past auth, this engine-less server answers every socket so
NO_ENGINE = {"message": "engine: unknown engine 'pocket'; available: (none: this gateway runs no TTS engine)",
             "error": "unknown_engine", "code": 400}


def nested_bomb(size: int) -> str:
    """A first message of ``size`` bytes that a JSON parser turns into millions of lists."""
    head, tail = '{"text": " ", "voice_settings": {"x": [', "[]]}}"
    return head + "[]," * ((size - len(head) - len(tail)) // 3) + tail


def ws_url(gateway: GatewayProcess) -> str:
    return gateway.url.replace("http://", "ws://") + PATH


async def open_socket(gateway: GatewayProcess, client: str, compression: str | None = "deflate") -> ClientConnection:
    return await connect(ws_url(gateway), additional_headers={"X-Forwarded-For": client}, max_size=None,
                         open_timeout=WAIT_S, close_timeout=WAIT_S, ping_interval=None, compression=compression)


async def close_of(ws: ClientConnection) -> tuple[int | None, str | None]:
    """Read until the server closes; its close code and reason."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), WAIT_S)
    except ConnectionClosed:
        pass
    return ws.close_code, ws.close_reason


async def authenticate(ws: ClientConnection) -> object:
    """Send the key in the first message: what the socket answers (a message, or its close)."""
    try:
        await ws.send(json.dumps({"text": " ", "xi_api_key": KEY}))
        return json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
    except ConnectionClosed:
        return ("close", ws.close_code, ws.close_reason)


@pytest.mark.parametrize("compression", [None, "deflate"])
def test_a_16_mib_nested_json_first_message_without_a_key_is_refused_from_its_header(tmp_path, compression) -> None:
    with running_gateway(tmp_path, "none", env=BASE_ENV, address_space_bytes=ADDRESS_SPACE) as gateway:

        async def run() -> tuple[object, tuple[int | None, str | None], int, int]:
            warm = await open_socket(gateway, "203.0.113.7")  # every code path the bomb takes, loaded first
            warm_answer = await authenticate(warm)
            await warm.close()
            before = peak_rss_bytes(gateway.proc.pid)
            ws = await open_socket(gateway, "203.0.113.8", compression)
            with contextlib.suppress(ConnectionClosed):  # the server may close while it still goes out
                await ws.send(nested_bomb(BOMB_BYTES))
            closed = await close_of(ws)
            return warm_answer, closed, before, peak_rss_bytes(gateway.proc.pid)

        warm_answer, closed, before, after = asyncio.run(run())
    assert warm_answer == NO_ENGINE  # the key in a first message is accepted; this server has no engine
    assert after - before < 8 * 1024 * 1024, f"peak memory grew by {(after - before) / 2**20:.0f} MiB"
    if compression is None:
        assert closed == (1009, f"frame with {len(nested_bomb(BOMB_BYTES))} bytes exceeds limit of 16384 bytes")
    else:  # compressed, the frame is some 16 KiB; it is refused from its header or while it inflates
        code, reason = closed
        assert code == 1009 and reason is not None
        assert reason.startswith("frame ") and reason.endswith(" exceeds limit of 16384 bytes"), reason


def test_upgrades_past_limit_concurrency_get_503(tmp_path) -> None:
    env = {**BASE_ENV, "VOXGATE_LIMIT_CONCURRENCY": "8", "VOXGATE_AUTH_WAIT_S": "60"}
    with running_gateway(tmp_path, "none", env=env) as gateway:

        async def run() -> tuple[int, list[int], list[object]]:
            held: list[ClientConnection] = []
            refused: list[int] = []
            for n in range(24):  # one at a time, each from an address of its own, none sends anything
                try:
                    held.append(await open_socket(gateway, f"203.0.113.{n + 1}"))
                except InvalidStatus as exc:
                    refused.append(exc.response.status_code)
            answers = [await authenticate(ws) for ws in held]
            for ws in held:
                await ws.close()
            return len(held), refused, answers

        accepted, refused, answers = asyncio.run(run())
    # as uvicorn counts for HTTP: this connection included, the 8th finds the limit reached
    assert (accepted, refused) == (7, [503] * 17)
    assert answers == [NO_ENGINE] * 7


def test_sockets_waiting_for_their_key_are_capped_per_address_and_in_all(tmp_path) -> None:
    env = {**BASE_ENV, "VOXGATE_PENDING_SOCKETS": "6", "VOXGATE_PENDING_SOCKETS_PER_CLIENT": "4",
           "VOXGATE_AUTH_WAIT_S": "60"}
    with running_gateway(tmp_path, "none", env=env) as gateway:

        async def run() -> list[object]:
            sockets = [await open_socket(gateway, "203.0.113.10") for _ in range(6)]
            sockets += [await open_socket(gateway, "203.0.113.20") for _ in range(3)]
            answers = [await authenticate(ws) for ws in sockets]
            again = await open_socket(gateway, "203.0.113.10")  # the settled ones count no more
            answers.append(await authenticate(again))
            for ws in [*sockets, again]:
                await ws.close()
            return answers

        answers = asyncio.run(run())
    per_address = ("close", 1013, "too many unauthenticated sockets from this address (limit 4); retry later")
    in_all = ("close", 1013, "too many unauthenticated sockets on this server (limit 6); retry later")
    assert answers == [NO_ENGINE] * 4 + [per_address] * 2 + [NO_ENGINE] * 2 + [in_all] + [NO_ENGINE]


def test_a_socket_that_never_sends_its_key_is_closed_after_the_auth_wait(tmp_path) -> None:
    env = {**BASE_ENV, "VOXGATE_AUTH_WAIT_S": "1"}
    with running_gateway(tmp_path, "none", env=env) as gateway:

        async def run() -> tuple[int | None, str | None]:
            ws = await open_socket(gateway, "203.0.113.30")
            return await close_of(ws)

        assert asyncio.run(run()) == (1008, "API key required")


def test_a_frame_announcing_more_than_the_pre_auth_cap_is_refused_before_its_payload(tmp_path) -> None:
    """A raw client: the upgrade, then a text frame's header announcing 1 MiB and 4 KiB
    of its payload; the rest never comes. The server answers from the header."""
    with running_gateway(tmp_path, "none", env={**BASE_ENV, "VOXGATE_AUTH_WAIT_S": "30"}) as gateway:
        port = int(gateway.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
            sock.sendall((f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          "Sec-WebSocket-Version: 13\r\nX-Forwarded-For: 203.0.113.40\r\n\r\n").encode())
            assert read_head(sock).startswith(b"HTTP/1.1 101 ")
            mask = b"\1\2\3\4"
            sock.sendall(bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 1 << 20) + mask + b"\0" * 4096)
            first, payload = read_frame(sock)
    assert first == 0x88  # a close frame
    assert (struct.unpack("!H", payload[:2])[0], payload[2:].decode()) == (
        1009, "frame with 1048576 bytes exceeds limit of 16384 bytes")


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"the server closed after {data!r}")
        data += chunk
    return data


def read_head(sock: socket.socket) -> bytes:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += recv_exactly(sock, 1)
    return head


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """The server's next short frame but its keepalive pings: its first byte and its payload."""
    while True:
        first, length = recv_exactly(sock, 2)
        payload = recv_exactly(sock, length)
        if first != 0x89:
            return first, payload
