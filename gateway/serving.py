"""Running the app under uvicorn: one ``uvicorn.Config`` for every listener, and
the HTTP protocol classes it uses.

uvicorn bounds open connections (``limit_concurrency``: past it new requests get
503) but gives a connection unlimited time to send its request head, so silent
or trickling sockets could hold every slot before auth ever runs. The protocol
here closes a connection whose request head is not complete within
``header_timeout_s`` of its opening, or of the end of its previous response.

It also offers the app one ASGI extension, ``scope["extensions"]["voxgate.abort"]``:
a callable that drops the connection at once. A streaming response whose client
stopped reading cannot finish (finishing waits for that client), and a closed
transport would still hold the socket until its unsent buffer drains, which a
client that never reads never lets happen; aborting frees it.

uvicorn checks ``limit_concurrency`` only for plain HTTP requests: an upgrade
returns before the check, so WebSockets could be opened past it. The WebSocket
protocol here (websockets' sans-I/O one, as uvicorn picks by default) answers an
upgrade 503 by the same count, and reads every socket's messages with a small
cap (``PRE_AUTH_MAX_MESSAGE_BYTES``) until the app lifts it through the
``voxgate.ws_max_size`` extension once the client is known (gateway/admission.py):
a frame announcing more is refused 1009 from its header, before its payload is
buffered.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from gateway.config import Settings
from gateway.streaming import ABORT_EXTENSION

WS_MAX_SIZE = 16 * 1024 * 1024
# What a socket may send before the app knows who it is: a first message is some text and a key.
PRE_AUTH_MAX_MESSAGE_BYTES = 16 * 1024
WS_MAX_SIZE_EXTENSION = "voxgate.ws_max_size"
OVER_CONCURRENCY = "Exceeded concurrency limit.\n"

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def _base_protocol() -> type[asyncio.Protocol]:
    if importlib.util.find_spec("httptools") is not None:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    return H11Protocol


def guarded_protocol(header_timeout_s: float, base: type[Any] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools when installed, else h11) with a
    request-head timeout and the abort extension (see the module docstring)."""
    parent: type[Any] = base or _base_protocol()

    class GuardedHttpProtocol(parent):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer: asyncio.TimerHandle | None = None
            self._head_cycle: Any = None
            inner: ASGIApp = self.app  # type: ignore[has-type]

            async def app(scope: Scope, receive: Any, send: Any) -> None:
                if scope.get("type") == "http":
                    scope.setdefault("extensions", {})[ABORT_EXTENSION] = self._abort
                await inner(scope, receive, send)

            self.app = app

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def handle_websocket_upgrade(self, *args: Any) -> None:
            self._cancel_head_timer()  # the socket now belongs to the WebSocket protocol
            super().handle_websocket_upgrade(*args)

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_timeout)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            cycle = self.cycle
            waiting_for_head = cycle is self._head_cycle and (cycle is None or cycle.response_complete)
            if waiting_for_head and not self.transport.is_closing():
                self.transport.abort()

        def _abort(self) -> None:
            self.transport.abort()  # a no-op on a connection already lost

    return GuardedHttpProtocol


class AdmittingWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol with the upgrade counted against
    ``limit_concurrency`` and a message cap the app lifts (the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn.max_message_size = min(PRE_AUTH_MAX_MESSAGE_BYTES, self.config.ws_max_size)

    def handle_connect(self, event: Request) -> None:
        limit = self.config.limit_concurrency
        # as uvicorn counts for HTTP: the open connections (this one included) and the running app tasks
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self.logger.warning("Exceeded concurrency limit: WebSocket upgrade refused.")
            self.handshake_initiated = self.handshake_complete = self.close_sent = True
            self.conn.send_response(self.conn.reject(503, OVER_CONCURRENCY))
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.transport.close()
            return
        super().handle_connect(event)
        if hasattr(self, "scope"):  # the app task starts on the next loop turn: its scope can still gain this
            self.scope["extensions"][WS_MAX_SIZE_EXTENSION] = self.set_max_message_size

    def set_max_message_size(self, max_bytes: int) -> None:
        """Messages up to ``max_bytes`` (never above ``ws_max_size``), from the next frame
        whose first byte arrives after this call (websockets sizes a frame when it starts)."""
        self.conn.max_message_size = min(max_bytes, self.config.ws_max_size)


def uvicorn_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration of a gateway listener, from ``settings``."""
    options: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "log_level": settings.log_level, "log_config": None,
        "ws_max_size": WS_MAX_SIZE, "proxy_headers": False, "server_header": False,
        "access_log": settings.log_level == "debug",
        "limit_concurrency": settings.limit_concurrency,
        "http": guarded_protocol(settings.header_timeout_s), "ws": AdmittingWebSocketProtocol,
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)
