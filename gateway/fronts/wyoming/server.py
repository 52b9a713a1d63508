"""The Wyoming listener, started and stopped by the app's lifespan.

It serves the same engines, ASR service and session limits as the HTTP and
WebSocket routes (all read from the lifespan state). Every connection is a
task this server keeps, and ``aclose`` cancels and awaits them all. A client
that is neither loopback nor in ``VOXGATE_TRUSTED_NETWORKS`` gets one
``error`` event and the connection is closed (see trust.py for why).

Every connection is held in the session registry, so the drain before a stop
reaches it (connection.py); one that arrives while the server drains gets one
``error`` ``draining`` and is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from auth.codes import LOOPBACK_REQUIRED
from gateway.config import Settings
from gateway.errors import OverCapacity
from gateway.fronts.wyoming import messages as msg
from gateway.fronts.wyoming.connection import Connection
from gateway.fronts.wyoming.link import Link, PeerGone
from gateway.fronts.wyoming.trust import client_allowed
from gateway.fronts.wyoming.wire import MAX_LINE_BYTES, Event
from gateway.fronts.wyoming.zeroconf import Announcement, LanAddress, announce
from gateway.registry import SessionRegistry

log = logging.getLogger("voxgate.wyoming")

STOP_TIMEOUT_S = 10.0


class WyomingServer:
    def __init__(self, settings: Settings, state: Mapping[str, Any], *, version: str, lan_ipv4: LanAddress) -> None:
        """``version`` (the gateway's, for ``info``) and ``lan_ipv4`` (the address
        zeroconf announces for a wildcard bind) come from the app that builds it."""
        address = settings.wyoming_address
        if address is None:
            raise ValueError("WyomingServer needs settings.wyoming_uri")
        self.host, self.port = address
        self.settings = settings
        self.state = state
        self.version = version
        self.lan_ipv4 = lan_ipv4
        self.connections = 0  # served since start, refused ones included
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._announcement: Announcement | None = None

    async def start(self) -> None:
        """Bind the port (an ``OSError`` says why not) and start accepting."""
        self._server = await asyncio.start_server(self._on_client, self.host, self.port, limit=MAX_LINE_BYTES)
        sockets = self._server.sockets or ()
        if sockets:
            self.port = int(sockets[0].getsockname()[1])  # the real port when 0 was asked for
        log.info("Wyoming listening on tcp://%s:%d", self.host, self.port)
        if self.settings.wyoming_zeroconf:
            self._announcement = await announce(self.host, self.port, self.lan_ipv4)

    @property
    def uri(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"

    async def aclose(self) -> None:
        if self._announcement is not None:
            await self._announcement.aclose()
            self._announcement = None
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
        if server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(server.wait_closed(), STOP_TIMEOUT_S)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            peer = writer.get_extra_info("peername") or ("?", 0)
            host, port = str(peer[0]), int(peer[1])
            client = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            if not client_allowed(self.settings, host):
                log.warning("wyoming: refused %s (not loopback, not in VOXGATE_TRUSTED_NETWORKS)", client)
                await self._refuse(writer, client, msg.error(
                    f"this Wyoming server serves loopback and VOXGATE_TRUSTED_NETWORKS clients only; {host} is "
                    "neither", LOOPBACK_REQUIRED))
                return
            connection = Connection(reader, writer, client, self.settings, self.state, self.version)
            sessions: SessionRegistry = self.state["sessions"]
            try:
                hold = sessions.hold(f"wyoming:{client}", connection.drain)
            except OverCapacity as exc:  # draining
                await self._refuse(writer, client, msg.error(exc.message, exc.code))
                return
            try:
                await connection.run()
            finally:
                sessions.release(hold)
        except asyncio.CancelledError:
            # Only aclose() cancels these tasks; ending quietly keeps asyncio's stream
            # callback from logging the cancellation as an error.
            writer.close()
        except Exception:  # one connection's bug must not reach the listener
            log.exception("wyoming connection failed")
            writer.close()
        finally:
            self._tasks.discard(task)

    async def _refuse(self, writer: asyncio.StreamWriter, client: str, error: Event) -> None:
        link = Link(writer, client, send_timeout_s=5.0)
        with contextlib.suppress(PeerGone):
            await link.send(error)
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 5.0)
