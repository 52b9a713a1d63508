"""The streams and file requests one sidecar serves, multiplexed on its pipe,
and where each event from the pipe goes.

Stream and request ids are unique over the supervisor's life, so an event of
a stream that was closed (or of a request that timed out) finds nothing and
is dropped. When a process is lost, the streams it held are taken back
(``take_back``) for the supervisor to charge (gateway/dictation/faults.py) and
replay (gateway/dictation/replay.py), and every open request fails.

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from gateway.dictation.pipe import ForStream, Lag, RequestFailed, SidecarEvent, Transcription
from gateway.dictation.stream import AsrStream, StreamOwner
from gateway.errors import GatewayError
from gateway.protocol.common import ErrorEvent


class StreamTable:
    def __init__(self) -> None:
        self.streams: dict[str, AsrStream] = {}
        self.requests: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    def add(self, owner: StreamOwner, options: dict[str, Any]) -> AsrStream:
        stream = AsrStream(owner, f"s{next(self._ids)}", options)
        self.streams[stream.id] = stream
        return stream

    def forget(self, stream: AsrStream) -> None:
        self.streams.pop(stream.id, None)

    def new_request(self) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        req = f"r{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.requests[req] = future
        return req, future

    def drop_request(self, req: str) -> None:
        self.requests.pop(req, None)

    def dispatch(self, event: SidecarEvent) -> None:
        """Hand one event from the running process to the stream or request it names."""
        if isinstance(event, ForStream):
            stream = self.streams.get(event.stream)
            if stream is not None:
                stream.deliver(event.event)
        elif isinstance(event, Lag):
            for sid, lag in event.streams.items():
                lagging = self.streams.get(sid)
                if lagging is not None:
                    lagging.lag_s = lag
        elif isinstance(event, Transcription | RequestFailed):
            future = self.requests.get(event.req)
            if future is None or future.done():
                return
            if isinstance(event, Transcription):
                future.set_result(dict(event.result))
            else:
                future.set_exception(GatewayError(event.error.message, code=event.error.code))
        # Pong: the watchdog heard it; Hello and Fatal come only at start-up

    def take_back(self) -> list[AsrStream]:
        """The process ended: the streams it held are no longer live (they are replayed)."""
        held = [s for s in self.streams.values() if s.live]
        for stream in held:
            stream.live = False
        return held

    def report(self, event: ErrorEvent) -> None:
        """Tell every open stream's client."""
        for stream in list(self.streams.values()):
            stream.report(event)

    def fail_requests(self, error: Callable[[], GatewayError]) -> None:
        for future in self.requests.values():
            if not future.done():
                future.set_exception(error())
