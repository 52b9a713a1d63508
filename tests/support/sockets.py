"""Reading a TestClient WebSocket in tests: the next message, or the close."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from starlette.websockets import WebSocketDisconnect

# Not a speed bar: a server that never answers fails the test instead of hanging the run.
RECEIVE_DEADLINE_S = 120.0


async def _receive_within(ws: Any, deadline_s: float) -> Any:
    with anyio.fail_after(deadline_s):
        return await ws._send_rx.receive()


def receive(ws: Any, deadline_s: float = RECEIVE_DEADLINE_S) -> Any:
    """The next message: a dict for JSON text, bytes for binary. A close raises
    ``WebSocketDisconnect`` with its code and reason; no message within
    ``deadline_s`` raises ``TimeoutError``."""
    message = ws.portal.call(_receive_within, ws, deadline_s)
    if message["type"] == "websocket.close":
        raise WebSocketDisconnect(message["code"], message.get("reason"))
    if message.get("text") is not None:
        return json.loads(message["text"])
    return message["bytes"]


def close_code(ws: Any) -> tuple[int, str]:
    """Read until the socket closes; its (code, reason)."""
    with pytest.raises(WebSocketDisconnect) as info:
        while True:
            receive(ws)
    return info.value.code, info.value.reason


def next_close(ws: Any) -> tuple[int, str]:
    """The next message must be the close; its (code, reason)."""
    try:
        message = receive(ws)
    except WebSocketDisconnect as closed:
        return closed.code, closed.reason
    raise AssertionError(f"a message came before the close: {message!r}")
