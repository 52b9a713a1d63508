"""AuthMiddleware: pure ASGI, decides every HTTP request and WebSocket upgrade.

The decision is ``policy.decide``; this module reads the auth state from the
lifespan state in ``scope["state"]["auth"]``, records the principal in
``scope["voxgate.principal"]`` and turns a refusal into the wire form:
HTTP JSON ``{"detail": ..., "code": ...}`` (+ ``Retry-After`` on 429), or for a WebSocket
accept-then-close 1008 with the detail as reason, because a browser cannot read
the status of a refused handshake.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .access import RouteClass
from .credentials import answer_subprotocol
from .policy import NOT_READY, Refusal, decide
from .principal import SCOPE_KEY, Scope
from .state import AuthState

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CLOSE_POLICY_VIOLATION = 1008
STATE_KEY = "auth"

log = logging.getLogger("voxgate.auth")


class AuthMiddleware:
    def __init__(self, app: ASGIApp, classify: Callable[[Scope], RouteClass]) -> None:
        self.app = app
        self.classify = classify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state = (scope.get("state") or {}).get(STATE_KEY)
        if not isinstance(state, AuthState):
            # Fail closed: without its state the middleware cannot tell anyone apart.
            log.error("auth state missing from the lifespan state; refusing %s", scope.get("path", ""))
            await refuse(scope, receive, send, Refusal(503, NOT_READY))
            return
        decision = decide(scope, self.classify(scope), state)
        if isinstance(decision, Refusal):
            log.debug("auth: refused %s %s from %s: %s", scope["type"], scope.get("path", ""),
                      _client(scope), decision.detail)
            await refuse(scope, receive, send, decision)
            return
        scope[SCOPE_KEY] = decision
        await self.app(scope, receive, send)


async def refuse(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """Send ``refusal`` on the scope's transport."""
    if scope["type"] == "websocket":
        message = await receive()
        if message["type"] != "websocket.connect":  # the client left before the handshake
            return
        await send({"type": "websocket.accept", "subprotocol": answer_subprotocol(scope)})
        await send({"type": "websocket.close", "code": CLOSE_POLICY_VIOLATION, "reason": refusal.detail})
        return
    body = json.dumps(refusal.body()).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.retry_after_s is not None:
        headers.append((b"retry-after", str(refusal.retry_after_s).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _client(scope: Scope) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"
