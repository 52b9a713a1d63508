"""Resume tokens: which held session a reconnect continues (/v1/dictation and
/v1/tts, each with its own store, so a token of one is unknown to the other).

A session opened with ``resumable=true`` gets a token in each ``ready``:
``<replica>.<secret>``, this replica's id (gateway/replica.py), which is no
secret and lets a load balancer route the resume here, then 32 random bytes,
URL-safe. The store keeps only the token's SHA-256, never the token (and the
access log masks ``?resume=``, auth/redact.py). A token that names another
replica is refused with ``resume_elsewhere`` before anything is looked up; one
that names none was never issued by a replica (``resume_unknown``). A token is:

- bound to the principal that opened the session (``principal_owner``): any
  other gets ``resume_forbidden``, and the token stays good for its owner;
- single-use: a resume rotates it (the resumed ``ready`` carries the next one);
  the used one answers ``resume_used``;
- valid while its session lives (attached, or held for ``grace_s`` after a
  drop), then for one more ``grace_s`` after the session ended, during which one
  resume collects what its client missed (``resume_expired`` follows when the
  grace was what ended it); after that it answers ``resume_expired``, and once
  forgotten ``resume_unknown``, as a token this server never issued does.

Bounds: live sessions are bounded by the session limits (a held session keeps
its place, gateway/registry.py); ended ones by ``max_kept`` (oldest forgotten
first), each with its own cap; spent tokens by ``MAX_SPENT``.

Runs on the event loop only; ``claim`` awaits nothing, so two resumes with one
token cannot both get it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from starlette.websockets import WebSocket

from auth.principal import PrincipalKind, Scope, principal_of
from gateway.errors import GatewayError, close_code_for, close_socket, refuse_socket
from gateway.protocol.dictation import parse_resume_request
from gateway.registry import address_share
from gateway.replica import FALLBACK, is_replica_id

MAX_SPENT = 4096  # used and expired tokens remembered, so they answer with why
SPENT_KEEP_GRACES = 10  # ... for this many graces
SECRET_BYTES = 32

# Principals that share one identity: whoever holds the key (or a session or
# ticket minted from it), whoever holds the PIN, this machine. The others are
# known only by their address.
_IDENTITY = {PrincipalKind.API_KEY: "key", PrincipalKind.SESSION: "key", PrincipalKind.TICKET: "key",
             PrincipalKind.PIN: "pin", PrincipalKind.PIN_SESSION: "pin", PrincipalKind.LOOPBACK: "loopback"}


def principal_owner(scope: Scope) -> str:
    """Who a session belongs to, for its resume token."""
    principal = principal_of(scope)
    if principal is None:
        return "?"
    identity = _IDENTITY.get(principal.kind)
    return identity or f"{principal.kind.value}@{address_share(principal.client)}"


class Resumable(Protocol):
    """What the store needs of a held session's transport."""

    owner: str
    token_hash: str | None

    def check_resume(self, last_seq: int) -> None:
        """Raise the refusal of a resume after ``last_seq``."""

    def release(self) -> None:
        """The session is over: whatever socket it had is no longer used."""


class ResumeSocket(Resumable, Protocol):
    """A transport a resume socket can continue (``resume_socket``)."""

    async def attach(self, websocket: WebSocket, last_seq: int, token: str) -> LinkOver: ...

    async def deliver_kept(self, websocket: WebSocket, last_seq: int) -> None: ...


class LinkOver(Protocol):
    over: asyncio.Future[None]


T = TypeVar("T", bound=Resumable)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(replica: str) -> str:
    return f"{replica}.{secrets.token_urlsafe(SECRET_BYTES)}"


def token_replica(token: str) -> str | None:
    """The replica a token names (the part before its first ``.``), or None when it names none."""
    replica, dot, secret = token.partition(".")
    return replica if dot and secret and is_replica_id(replica) else None


def elsewhere(replica: str, here: str) -> GatewayError:
    return GatewayError(f"that resume token belongs to replica {replica!r}, this is {here!r}: the load balancer must "
                        "send each resume to the replica named before the first '.' of its token (docs/deployment.md)",
                        code="resume_elsewhere")


class ResumeStore(Generic[T]):
    def __init__(self, grace_s: float, max_kept: int, clock: Callable[[], float] = time.monotonic, *,
                 replica: str = FALLBACK) -> None:
        self.grace_s = grace_s
        self.replica = replica  # the prefix of every token issued here (the app passes ``Settings.replica``)
        self.max_kept = max_kept
        self._clock = clock
        self._live: dict[str, T] = {}
        self._kept: OrderedDict[str, tuple[T, float]] = OrderedDict()  # -> until
        self._spent: OrderedDict[str, tuple[str, float]] = OrderedDict()  # -> (code, until)

    def counts(self) -> dict[str, int]:
        return {"live": len(self._live), "kept": len(self._kept), "spent": len(self._spent)}

    def issue(self, transport: T) -> str:
        """A new token for ``transport``; its previous one is spent (``resume_used``)."""
        token = new_token(self.replica)
        if transport.token_hash is not None and self._live.get(transport.token_hash) is transport:
            del self._live[transport.token_hash]
            self._spend(transport.token_hash, "resume_used")
        transport.token_hash = _digest(token)
        self._live[transport.token_hash] = transport
        return token

    def session_over(self, transport: T) -> None:
        """The session ended: its token collects what it sent, once, for one grace."""
        transport.release()
        key = transport.token_hash
        if key is None or self._live.get(key) is not transport:
            return
        del self._live[key]
        self._purge()
        self._kept[key] = (transport, self._clock() + self.grace_s)
        while len(self._kept) > self.max_kept:
            oldest, _ = self._kept.popitem(last=False)
            self._spend(oldest, "resume_expired")

    def claim(self, token: str, owner: str, last_seq: int) -> tuple[T, str | None]:
        """The session ``token`` resumes, and its next token (None: it has ended and
        the token is spent). Raises the refusal's ``GatewayError``."""
        replica = token_replica(token)
        if replica is not None and replica != self.replica:
            raise elsewhere(replica, self.replica)
        self._purge()
        key = _digest(token)
        live = self._live.get(key)
        if live is not None:
            self._check_owner(live, owner)
            live.check_resume(last_seq)
            return live, self.issue(live)
        kept = self._kept.get(key)
        if kept is not None:
            self._check_owner(kept[0], owner)
            kept[0].check_resume(last_seq)
            del self._kept[key]
            self._spend(key, "resume_used")
            return kept[0], None
        spent = self._spent.get(key)
        if spent is not None:
            raise GatewayError(_SPENT_MESSAGES[spent[0]], code=spent[0])
        raise GatewayError("no session of this server has that resume token; open a new session",
                           code="resume_unknown")

    @staticmethod
    def _check_owner(transport: T, owner: str) -> None:
        if transport.owner != owner:
            raise GatewayError("that resume token belongs to a session another principal opened",
                               code="resume_forbidden")

    def _spend(self, key: str, code: str) -> None:
        self._spent[key] = (code, self._clock() + SPENT_KEEP_GRACES * self.grace_s)
        self._spent.move_to_end(key)
        while len(self._spent) > MAX_SPENT:
            self._spent.popitem(last=False)

    def _purge(self) -> None:
        now = self._clock()
        while self._kept:
            key, (_, until) = next(iter(self._kept.items()))
            if until > now:
                break
            del self._kept[key]
            self._spend(key, "resume_expired")
        while self._spent and next(iter(self._spent.values()))[1] <= now:
            self._spent.popitem(last=False)


_SPENT_MESSAGES = {
    "resume_used": "that resume token was already used; resume with the token of the latest ready",
    "resume_expired": "that session ended and its grace for a resume has passed; open a new session",
}

S = TypeVar("S", bound=ResumeSocket)


async def resume_socket(websocket: WebSocket, store: ResumeStore[S]) -> None:
    """``?resume=<token>&last_seq=N``: continue the held session on this socket for
    as long as the session uses it, or collect an ended one's messages."""
    try:
        request = parse_resume_request(websocket.query_params)
        transport, token = store.claim(request.token, principal_owner(websocket.scope), request.last_seq)
    except GatewayError as exc:
        await refuse_socket(websocket, exc)
        return
    if token is None:
        await transport.deliver_kept(websocket, request.last_seq)
        return
    link = await transport.attach(websocket, request.last_seq, token)
    # done when the session closes, drops or leaves this socket, and at the latest when the session ends
    await link.over


async def close_collected(websocket: WebSocket, ended_by: GatewayError | None, closed_with: tuple[int, str] | None,
                          timeout_s: float) -> None:
    """The end of a resume that collected an ended session's messages: the error that
    ended the session (its grace, or its memory cap) and its close, or the session's own
    close (``closed_with``; a normal end when None)."""
    if ended_by is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.send_json(ended_by.to_event()), timeout_s)
        await close_socket(websocket, ended_by.close_code, ended_by.message)
        return
    close, reason = closed_with or (close_code_for("normal_end"), "")
    await close_socket(websocket, close, reason)


async def send_unless_over(send: Awaitable[None], over: asyncio.Future[None], timeout_s: float) -> bool:
    """Run one socket ``send`` of a held session's link; True when it was handed to the
    socket, False when it failed, timed out, or the link ended (``over``: the socket was
    replaced or the session ended) first."""
    task = asyncio.ensure_future(send)
    waits: set[asyncio.Future[Any]] = {task, over}
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    return task.done() and not task.cancelled() and task.exception() is None


REPLACED = object()  # what ``receive_unless_over`` gives when the link ended first


async def receive_unless_over(receive: Awaitable[Any], over: asyncio.Future[None]) -> Any:
    """The next message ``receive`` reads on a held session's link, or ``REPLACED`` when
    the link ended first (a resume took the session to another socket). Raises what
    ``receive`` raises."""
    task = asyncio.ensure_future(receive)
    waits: set[asyncio.Future[Any]] = {task, over}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        return task.result() if task.done() else REPLACED
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
