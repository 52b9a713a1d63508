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
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from gateway.config import Settings
from gateway.streaming import ABORT_EXTENSION

WS_MAX_SIZE = 16 * 1024 * 1024

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


def uvicorn_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration of a gateway listener, from ``settings``."""
    options: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "log_level": settings.log_level, "log_config": None,
        "ws_max_size": WS_MAX_SIZE, "proxy_headers": False, "server_header": False,
        "access_log": settings.log_level == "debug",
        "limit_concurrency": settings.limit_concurrency,
        "http": guarded_protocol(settings.header_timeout_s),
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)
