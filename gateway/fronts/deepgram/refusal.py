"""Opening and refusing a Deepgram socket.

Deepgram answers a bad handshake with an HTTP status. Like every socket of this
gateway (and for the reason AUTH.md gives: a browser cannot read the status of
a refused handshake), a Deepgram socket is accepted first; a refusal is then a
Deepgram-shaped ``Error`` message and a close with the error's close code
(4400 bad request, 1013 over capacity or loading, 1011 unavailable) and its
message as the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from gateway.errors import CLOSE_TIMEOUT_S, GatewayError, close_socket


def new_request_id() -> str:
    return str(uuid.uuid4())


def request_headers(request_id: str) -> list[tuple[bytes, bytes]]:
    """Handshake response headers: Deepgram names each request in ``dg-request-id``."""
    return [(b"dg-request-id", request_id.encode("ascii"))]


async def refuse(websocket: WebSocket, error: GatewayError,
                 build: Callable[[str, str], dict[str, Any]]) -> None:
    """Send ``build(code, message)`` and close with the error's close code."""
    with contextlib.suppress(Exception):  # the client left first: the close below is a no-op then
        await asyncio.wait_for(websocket.send_json(build(error.code, error.message)), CLOSE_TIMEOUT_S)
    await close_socket(websocket, error.close_code, error.message)
