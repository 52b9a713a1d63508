"""A TCP relay on 127.0.0.1 between a client and a server that can break the
path the ways networks do, for the resume tests.

``cut(seconds)`` closes every connection it carries (both ends see the stream
end with no WebSocket close frame) and refuses new ones for ``seconds``
(``cut_during(work)``: while ``work`` runs);
``stall()`` stops forwarding on every connection it carries without closing
anything (bytes read are dropped, like packets into a dead route), while new
connections are carried normally. Every pipe is a task the relay owns and
cancels on ``aclose``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.support.net import free_port

CHUNK = 64 * 1024
T = TypeVar("T")


class Pipe:
    """One carried connection: two copy tasks."""

    def __init__(self, relay: CutRelay, client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 server: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
        self.relay = relay
        self.writers = (client[1], server[1])
        self.stalled = False
        self.tasks = [asyncio.create_task(self._copy(client[0], server[1], upstream=True)),
                      asyncio.create_task(self._copy(server[0], client[1], upstream=False))]

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(CHUNK):
                if not self.stalled:
                    if upstream:
                        self.relay.upstream_bytes += len(data)
                    writer.write(data)
                    await writer.drain()
        self.close()

    def close(self) -> None:
        for writer in self.writers:
            writer.close()

    async def aclose(self) -> None:
        self.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class CutRelay:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.pipes: list[Pipe] = []
        self.connections = 0  # carried so far
        self.upstream_bytes = 0  # client to server, forwarded so far
        self._server: asyncio.Server | None = None
        self._breaking: asyncio.Task[float] | None = None  # break_once's

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._carry, "127.0.0.1", self.port)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(*self.target), 10)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        self.connections += 1
        self.pipes.append(Pipe(self, (reader, writer), upstream))

    async def cut(self, seconds: float) -> None:
        """Close every carried connection, refuse new ones for ``seconds``, then carry again."""
        await self._stop()
        await asyncio.sleep(seconds)
        await self.start()

    async def cut_during(self, work: Callable[[], Awaitable[T]]) -> T:
        """Close every carried connection and refuse new ones while ``work`` runs, then carry again."""
        await self._stop()
        try:
            return await work()
        finally:
            await self.start()

    def stall(self) -> None:
        """Stop forwarding on every carried connection, closing nothing."""
        for pipe in self.pipes:
            pipe.stalled = True

    def break_once(self, how: str) -> None:
        """Break the path the way a benchmark names it, in the background and the first
        time only: ``stall`` (no close) or a cut of that many seconds."""
        if self._breaking is None:
            self._breaking = asyncio.create_task(self._break(how))

    async def mended_at(self) -> float | None:
        """When the path ``break_once`` broke carried again (``time.monotonic``; a stall: at
        once), once it has; None when it was never broken."""
        return None if self._breaking is None else await self._breaking

    async def _break(self, how: str) -> float:
        if how == "stall":
            self.stall()
        else:
            await self.cut(float(how))
        return time.monotonic()

    async def _stop(self) -> None:
        """Stop listening and close every carried connection."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for pipe in self.pipes:
            await pipe.aclose()
        self.pipes.clear()
        if server is not None:
            await asyncio.wait_for(server.wait_closed(), 10)

    async def aclose(self) -> None:
        if self._breaking is not None and not self._breaking.done():
            self._breaking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._breaking
        await self._stop()
