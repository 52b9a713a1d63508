"""Streaming HTTP responses that give up on a client that stopped reading.

A streaming response waits on every send while its client reads nothing, and
holds whatever it owns (a TTS session slot, an engine stream) meanwhile. This
response abandons the stream once one send has made no progress for
``stall_timeout_s``: it closes the body iterator (whose cleanup releases the
slot), runs the background task, and drops the connection through the
server's ``voxgate.abort`` extension (gateway/serving.py) when there is one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

log = logging.getLogger("voxgate")

ABORT_EXTENSION = "voxgate.abort"


class ClientStalled(Exception):
    """One send made no progress within the stall timeout."""


class StallGuardedResponse(StreamingResponse):
    def __init__(self, content: Any, *, stall_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.stall_timeout_s = stall_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def guarded(message: MutableMapping[str, Any]) -> None:
            try:
                await asyncio.wait_for(send(message), self.stall_timeout_s)
            except asyncio.TimeoutError:
                raise ClientStalled from None

        try:
            await super().__call__(scope, receive, guarded)
        except ClientStalled:
            peer = scope.get("client")
            log.warning("%s %s from %s: the client read nothing for %g s; response abandoned", scope.get("method"),
                        scope.get("path"), peer[0] if peer else "?", self.stall_timeout_s)
            abort = scope.get("extensions", {}).get(ABORT_EXTENSION)
            if callable(abort):
                abort()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
            if self.background is not None:
                await self.background()
