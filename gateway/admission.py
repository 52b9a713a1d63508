"""Admission of WebSockets before their client is known.

A socket whose route takes its credential in the first message (auth/inband.py)
is let in *pending*: nobody is known yet, so what it may cost is bounded here.

- Its messages are read with the server's pre-auth cap (gateway/serving.py,
  ``PRE_AUTH_MAX_MESSAGE_BYTES``) until ``settled`` lifts it; every other socket
  has the cap lifted before its route runs.
- Pending sockets are counted globally (``pending_sockets``) and per client
  address (``pending_sockets_per_client``; the address after trusted proxies,
  auth/client_address.py). One past either cap is accepted and closed 1013 with a
  reason naming the cap, as an auth refusal is (a browser cannot read the status
  of a refused handshake); the client retries later.
- The route gives a pending socket ``auth_wait_s`` for its first message.

A pending socket stops counting when its route calls ``settled`` (its credential
was accepted) or when it ends, whichever comes first.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from auth import AuthState
from auth.client_address import resolve_client
from auth.credentials import answer_subprotocol
from auth.inband import is_pending
from auth.middleware import STATE_KEY as AUTH_STATE_KEY
from gateway.errors import close_code_for
from gateway.serving import WS_MAX_SIZE, WS_MAX_SIZE_EXTENSION

log = logging.getLogger("voxgate")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TICKET_KEY = "voxgate.pending"


@dataclass
class PendingSockets:
    """How many sockets wait for their first message, in all and per client address."""

    limit: int
    per_client_limit: int
    by_client: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def admit(self, client: str) -> str | None:
        """Count one more pending socket of ``client``; the refusal's reason past a cap."""
        if self.total >= self.limit:
            return f"too many unauthenticated sockets on this server (limit {self.limit}); retry later"
        if self.by_client.get(client, 0) >= self.per_client_limit:
            return (f"too many unauthenticated sockets from this address (limit {self.per_client_limit}); "
                    "retry later")
        self.total += 1
        self.by_client[client] = self.by_client.get(client, 0) + 1
        return None

    def release(self, client: str) -> None:
        self.total -= 1
        left = self.by_client[client] - 1
        if left:
            self.by_client[client] = left
        else:
            del self.by_client[client]


@dataclass
class _Ticket:
    pending: PendingSockets
    client: str
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.pending.release(self.client)


def lift_message_cap(scope: Scope) -> None:
    """Let the socket's messages be as large as the server allows (where the server
    offers the extension; an in-process test client has none)."""
    lift = scope.get("extensions", {}).get(WS_MAX_SIZE_EXTENSION)
    if callable(lift):
        lift(WS_MAX_SIZE)


def settled(scope: Scope) -> None:
    """The pending socket's credential was accepted: it is pending no more."""
    ticket = scope.get(TICKET_KEY)
    if isinstance(ticket, _Ticket):
        ticket.release()
    lift_message_cap(scope)


class AdmissionMiddleware:
    """Runs inside the auth middleware, which has set the principal (module docstring)."""

    def __init__(self, app: ASGIApp, pending: PendingSockets) -> None:
        self.app = app
        self.pending = pending

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        if not is_pending(scope):
            lift_message_cap(scope)
            await self.app(scope, receive, send)
            return
        auth = (scope.get("state") or {}).get(AUTH_STATE_KEY)
        networks = auth.config.forwarded_allow_ips if isinstance(auth, AuthState) else ()
        client = resolve_client(scope, networks).host
        refusal = self.pending.admit(client)
        if refusal is not None:
            log.warning("WebSocket %s from %s refused: %s", scope.get("path", ""), client, refusal)
            await _refuse(scope, receive, send, refusal)
            return
        ticket = _Ticket(self.pending, client)
        scope[TICKET_KEY] = ticket
        try:
            await self.app(scope, receive, send)
        finally:
            ticket.release()


async def _refuse(scope: Scope, receive: Receive, send: Send, reason: str) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":  # the client left before the handshake
        return
    await send({"type": "websocket.accept", "subprotocol": answer_subprotocol(scope)})
    await send({"type": "websocket.close", "code": close_code_for("over_capacity"), "reason": reason})
