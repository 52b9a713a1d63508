"""Fair shares of TTS sessions: /v1/tts sockets and HTTP speech streams count
against one share per client address; past it a socket closes 1013 and an
HTTP request gets 503 + Retry-After, each naming the per-client limit; a
session's slot is released however it ends, errors included."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from gateway.registry import SessionRegistry
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import LOOPBACK, tts_app, tts_client, wait_for
from tests.support.sockets import close_code, receive

PER_CLIENT = "too many TTS sessions from one client (limit 1 per client); end one of yours or try again later"


def sessions(client: Any) -> int:
    registry: SessionRegistry = client.app_state["sessions"]
    return registry.count("tts")


def test_sockets_and_http_streams_share_one_limit_per_client(tmp_path):
    with tts_client(tmp_path, max_tts_sessions_per_client=1) as client, client.websocket_connect("/v1/tts") as ws:
        assert receive(ws)["type"] == "ready"
        r = client.post("/v1/tts", json={"text": "No room for me."})
        assert (r.status_code, r.headers["retry-after"], r.json()) == (503, "5", {
            "detail": PER_CLIENT, "code": "over_capacity"})
        with client.websocket_connect("/v1/tts") as second:
            assert receive(second) == {"type": "error", "code": "over_capacity", "message": PER_CLIENT,
                                       "retryable": True}
            assert close_code(second) == (1013, PER_CLIENT)


def test_a_socket_ended_by_an_error_or_by_its_client_leaving_releases_its_slot(tmp_path):
    with tts_client(tmp_path, max_tts_sessions_per_client=1) as client:
        for _ in range(3):  # more times than the share holds: each slot came back
            with client.websocket_connect("/v1/tts") as ws:
                receive(ws)
                ws.send_text("x" * 100_000)  # over the message size limit: the socket closes 1009
                assert close_code(ws)[0] == 1009
            wait_for(lambda: sessions(client) == 0, "the slot of the socket closed for an error is released")
            with client.websocket_connect("/v1/tts") as ws:
                receive(ws)
            wait_for(lambda: sessions(client) == 0, "the slot of the socket its client left is released")


def test_an_http_stream_whose_engine_fails_at_the_start_releases_its_slot(tmp_path):
    engine = FakeTtsEngine(open_error=RuntimeError("an engine bug"))
    with TestClient(tts_app(tmp_path, engine, max_tts_sessions_per_client=1), client=LOOPBACK,
                    raise_server_exceptions=False) as client:
        for _ in range(2):
            assert client.post("/v1/tts", json={"text": "Fails."}).status_code == 500
        assert sessions(client) == 0
