"""Fair shares on the ElevenLabs sockets, against a real uvicorn on 127.0.0.1
with the ``websockets`` client: every context is a TTS session of its client's
share, so one key holder with four multi-stream sockets of five contexts each
(and keepalives) holds a quarter of the TTS slots, not all of them, and
another client still gets a session. The clients are told apart by the
address a trusted proxy names, as behind a reverse proxy in production."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from tests.gateway.fronts.elevenlabs.reading import MULTI
from tests.gateway.helpers import tts_app
from tests.support.net import running_server

KEY = "vgk-test-fair-shares-Qm7rT2wX9pL4"
ATTACKER, OTHER = "203.0.113.7", "198.51.100.2"
READ_TIMEOUT_S = 10.0
PER_CLIENT_REFUSAL = {"message": "too many TTS sessions from one client (limit 4 per client); end one of yours or "
                                 "try again later", "error": "over_capacity", "code": 503}


def headers(address: str) -> dict[str, str]:
    return {"xi-api-key": KEY, "X-Forwarded-For": address}


@pytest.fixture
async def gateway(tmp_path: Any) -> AsyncIterator[str]:
    app = tts_app(tmp_path, server_mode=True, api_key=KEY,
                  forwarded_allow_ips=(ipaddress.ip_network("127.0.0.1/32"),))
    async with running_server(app) as url:
        yield url.replace("http://", "ws://")


async def context_verdicts(ws: Any, contexts: list[str]) -> dict[str, Any]:
    """Per context: "speaking" once its audio comes, or the error it was refused with."""
    verdicts: dict[str, Any] = {}
    while len(verdicts) < len(contexts):
        message = json.loads(await asyncio.wait_for(ws.recv(), READ_TIMEOUT_S))
        context = message.get("contextId")
        if context in verdicts:
            continue
        if "error" in message:
            verdicts[context] = {k: v for k, v in message.items() if k != "contextId"}
        elif message.get("audio"):
            verdicts[context] = "speaking"
    return verdicts


async def test_one_key_holder_cannot_take_every_tts_slot_with_multi_stream_contexts(gateway):
    url = f"{gateway}{MULTI}?output_format=pcm_24000&inactivity_timeout=20"
    verdicts: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as stack:
        sockets = [await stack.enter_async_context(websockets.connect(url, additional_headers=headers(ATTACKER)))
                   for _ in range(4)]
        for ws in sockets:
            names = [f"c{n}" for n in range(5)]
            for name in names:
                await ws.send(json.dumps({"text": "Hold this slot. ", "context_id": name, "flush": True}))
            verdicts.append(await context_verdicts(ws, names))
            for name, verdict in verdicts[-1].items():
                if verdict == "speaking":  # keep the context alive, as the measured client did
                    await ws.send(json.dumps({"text": "", "context_id": name}))
        speaking = sum(v == "speaking" for socket in verdicts for v in socket.values())
        refused = [v for socket in verdicts for v in socket.values() if v != "speaking"]
        assert (speaking, len(refused)) == (4, 16)  # a quarter of VOXGATE_MAX_TTS_SESSIONS=16
        assert all(v == PER_CLIENT_REFUSAL for v in refused)

        # another client still gets a session; the holder's own next socket is refused 1013
        async with websockets.connect(f"{gateway}/v1/tts", additional_headers=headers(OTHER)) as other:
            ready = json.loads(await asyncio.wait_for(other.recv(), READ_TIMEOUT_S))
            assert ready["type"] == "ready"
        async with websockets.connect(f"{gateway}/v1/tts", additional_headers=headers(ATTACKER)) as more:
            refusal = json.loads(await asyncio.wait_for(more.recv(), READ_TIMEOUT_S))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(more.recv(), READ_TIMEOUT_S)
        assert refusal == {"type": "error", "code": "over_capacity", "retryable": True,
                           "message": PER_CLIENT_REFUSAL["message"]}
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1013, PER_CLIENT_REFUSAL["message"])

    # the sockets are gone, and with them every context's slot: the client has its share again
    await wait_for_no_tts_sessions(gateway)
    async with websockets.connect(url, additional_headers=headers(ATTACKER)) as ws:
        names = [f"again{n}" for n in range(4)]
        for name in names:
            await ws.send(json.dumps({"text": "Hold this slot. ", "context_id": name, "flush": True}))
        assert await context_verdicts(ws, names) == dict.fromkeys(names, "speaking")


async def wait_for_no_tts_sessions(gateway: str) -> None:
    async with httpx.AsyncClient(base_url=gateway.replace("ws://", "http://"), headers={"X-API-Key": KEY}) as http:
        for _ in range(500):
            sessions = (await http.get("/v1/admin/sessions")).json()["sessions"]
            if not [s for s in sessions if s["kind"] == "tts"]:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"TTS sessions still registered after their sockets closed: {sessions}")
