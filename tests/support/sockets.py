"""Reading a TestClient WebSocket in tests: the next message, or the close."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.websockets import WebSocketDisconnect


def receive(ws: Any) -> Any:
    """The next message: a dict for JSON text, bytes for binary. A close raises
    ``WebSocketDisconnect`` with its code and reason."""
    message = ws.receive()
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
