"""The LAN-share listener: a second uvicorn server serving the same app on the LAN, over HTTPS.

It runs inside the main server's event loop with ``lifespan="off"``: the main
lifespan owns every resource, and ``bind_state`` hands its state over, which a
small shim puts in each scope the way Starlette does for the main listener. The
socket is bound here, before uvicorn sees it, so a busy port is an ``OSError``
for the caller (uvicorn would exit the process). Signals stay with the main
server, which stops this one through the lifespan (``AuthState.aclose``).
It serves HTTPS (a phone's browser opens the microphone only on a secure
origin) with the certificate gateway/share_tls.py provides for the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator, Mapping
from typing import Any

import uvicorn

from auth.share import VIA_SHARE_SCOPE_KEY
from gateway.config import Settings
from gateway.serving import uvicorn_config
from gateway.share_tls import ShareCertificates

log = logging.getLogger("voxgate.lan_share")

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
# Any routable address works: connecting a UDP socket only picks the route, it sends nothing.
ROUTE_PROBE = ("192.0.2.1", 9)


def primary_lan_ipv4() -> str | None:
    """The address of the interface that carries the default route, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(ROUTE_PROBE)
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith(("127.", "0.")) else address


class _StateShim:
    """Puts the main lifespan state into every scope (uvicorn runs no lifespan here)."""

    def __init__(self, app: Any, state: Mapping[str, Any]) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope["state"] = dict(self.state)
            scope[VIA_SHARE_SCOPE_KEY] = True
        await self.app(scope, receive, send)


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the main one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class UvicornShareListener:
    """``auth.ShareListener`` over a second ``uvicorn.Server``.

    Binds ``settings.share_host`` (default: the primary LAN IPv4) on
    ``settings.share_port`` (0: the main port + 1, or any free port when the
    main port is 0 too). Not thread-safe; call from
    the event loop that runs the main server.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._state: Mapping[str, Any] | None = None
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._address: tuple[str, int] | None = None
        self._fingerprint: str | None = None
        supplied = (settings.share_cert, settings.share_key)
        self._certificates = ShareCertificates(
            settings.data_dir, (supplied[0], supplied[1]) if supplied[0] and supplied[1] else None)

    @property
    def tls_fingerprint(self) -> str | None:
        """The SHA-256 fingerprint of the certificate served, while running."""
        return self._fingerprint if self.running else None

    def bind_state(self, state: Mapping[str, Any]) -> None:
        self._state = state

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self, app: Any) -> tuple[str, int]:
        if self.running and self._address is not None:
            return self._address
        if self._state is None:
            raise RuntimeError("bind_state() must be called with the lifespan state before start()")
        host = self._settings.share_host or primary_lan_ipv4()
        if host is None:
            raise OSError("no LAN address found; set VOXGATE_SHARE_HOST to the address to share on")
        main_port = self._settings.port
        port = self._settings.share_port or (main_port + 1 if main_port else 0)
        pair = await asyncio.to_thread(self._certificates.for_host, host)  # may run openssl (bounded)
        sock = _bind(host, port)
        # proxy_headers off: X-Forwarded-For is auth's to judge (forwarded_allow_ips), nobody else's.
        config = uvicorn_config(_StateShim(app, self._state), self._settings, lifespan="off", access_log=False,
                                ssl_certfile=str(pair.cert), ssl_keyfile=str(pair.key))
        server = _QuietServer(config)
        task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name="lan-share-listener")
        try:
            await _wait_started(server, task)
        except BaseException:
            server.should_exit = True
            await _finish(task, server)
            sock.close()
            raise
        self._server, self._task, self._fingerprint = server, task, pair.fingerprint
        self._address = (host, sock.getsockname()[1])
        log.info("LAN sharing listening on https://%s:%d (certificate SHA-256 %s)", *self._address, pair.fingerprint)
        return self._address

    async def stop(self) -> None:
        server, task = self._server, self._task
        self._server = self._task = self._address = self._fingerprint = None
        if server is None or task is None:
            return
        server.should_exit = True
        await _finish(task, server)
        log.info("LAN sharing stopped")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def _wait_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT_S
    while not server.started:
        if task.done():
            task.result()  # raises what stopped it
            raise OSError("the share listener stopped during start-up")
        if loop.time() > deadline:
            raise OSError(f"the share listener did not start within {START_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.02)


async def _finish(task: asyncio.Task[None], server: uvicorn.Server) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)
    except asyncio.TimeoutError:
        server.force_exit = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    except Exception:  # the server failed on its own; it is stopped either way
        log.exception("LAN-share listener failed")
