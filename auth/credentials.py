"""Finding the credential a request presents.

One credential is used per request, the first found in this order:
``Authorization`` (scheme case-insensitive), the WebSocket subprotocol pair
``token, <key>`` (or ``realtime``, ``openai-insecure-api-key.<key>``),
``X-API-Key``, ``xi-api-key``, ``?api_key=``, ``?authorization=``, ``?ticket=``,
``X-Voxgate-Pin``, the ``vg_session`` cookie, the ``vg_pin`` cookie.

``xi-api-key`` (ElevenLabs' header) is the API key, like ``X-API-Key``;
``?authorization=`` (ElevenLabs' query form) a bearer token: the key or a session
token, with or without a ``Bearer `` prefix.

``Authorization: Token <key>`` (Deepgram's scheme) means the same as
``Bearer <key>``: the API key or a session token. Browsers cannot set headers
on a WebSocket, so Deepgram's browser clients offer the subprotocols
``token`` and ``<key>``; that pair is a bearer credential too, and the server
must then accept the socket with the ``token`` subprotocol
(``answer_subprotocol``). OpenAI's browser clients offer ``realtime`` and
``openai-insecure-api-key.<key>``: a bearer credential as well, answered with
``realtime``. Explicit credentials come before cookies, so a client that presents one
is judged by it alone, and a stale cookie riding along cannot change the answer.
Empty values count as absent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from starlette.requests import cookie_parser

from .principal import Scope

SESSION_COOKIE = "vg_session"
PIN_COOKIE = "vg_pin"
PIN_HEADER = "x-voxgate-pin"
KEY_HEADER = "x-api-key"
XI_KEY_HEADER = "xi-api-key"
BEARER_SCHEMES = ("bearer", "token")
TOKEN_SUBPROTOCOL = "token"
REALTIME_SUBPROTOCOL = "realtime"
OPENAI_KEY_SUBPROTOCOL = "openai-insecure-api-key."  # followed by the key


class CredentialKind(str, enum.Enum):
    BEARER = "bearer"  # Authorization: Bearer / Token, a subprotocol, ?authorization=: the API key or a session token
    API_KEY = "api_key"  # X-API-Key, xi-api-key or ?api_key=: the API key only
    TICKET = "ticket"  # ?ticket=: a WebSocket ticket
    PIN = "pin"  # X-Voxgate-Pin or the vg_pin cookie
    SESSION_COOKIE = "session_cookie"  # vg_session: a session token
    UNSUPPORTED = "unsupported"  # an Authorization scheme other than Bearer or Token

    @property
    def is_pin(self) -> bool:
        return self is CredentialKind.PIN


@dataclass(frozen=True)
class Credential:
    kind: CredentialKind
    value: str = field(repr=False)
    from_cookie: bool = False


def header_values(scope: Scope, name: str) -> list[str]:
    """Every value of header ``name`` (lower-case), decoded as latin-1 like the ASGI spec says."""
    wanted = name.encode("latin-1")
    return [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == wanted]


def first_header(scope: Scope, name: str) -> str | None:
    values = header_values(scope, name)
    return values[0] if values else None


def query_params(scope: Scope) -> dict[str, str]:
    """The first value of each query parameter."""
    raw = scope.get("query_string", b"").decode("latin-1")
    out: dict[str, str] = {}
    for k, v in parse_qsl(raw, keep_blank_values=True):
        out.setdefault(k, v)
    return out


def cookies(scope: Scope) -> dict[str, str]:
    return cookie_parser("; ".join(header_values(scope, "cookie")))


def _offered(scope: Scope) -> list[str]:
    if scope.get("type") != "websocket":
        return []
    return [str(p).strip() for p in scope.get("subprotocols") or ()]


def subprotocol_credential(scope: Scope) -> str | None:
    """The key or token of a WebSocket that offers the subprotocols ``token``, ``<value>``,
    or ``realtime`` with ``openai-insecure-api-key.<value>``."""
    offered = _offered(scope)
    if len(offered) >= 2 and offered[0].lower() == TOKEN_SUBPROTOCOL:
        return offered[1]
    return _openai_key(offered)


def _openai_key(offered: list[str]) -> str | None:
    if REALTIME_SUBPROTOCOL not in offered:
        return None
    for protocol in offered:
        if protocol.startswith(OPENAI_KEY_SUBPROTOCOL):
            return protocol[len(OPENAI_KEY_SUBPROTOCOL):]
    return None


def answer_subprotocol(scope: Scope) -> str | None:
    """The subprotocol the server must accept the socket with: ``token`` or
    ``realtime`` when the client presented its credential that way (a browser
    fails the handshake unless one of its offered subprotocols is echoed)."""
    if not subprotocol_credential(scope):
        return None
    return REALTIME_SUBPROTOCOL if _openai_key(_offered(scope)) else TOKEN_SUBPROTOCOL


def bearer_value(value: str) -> Credential:
    """A bearer credential written with or without its ``Bearer `` scheme."""
    scheme, _, token = value.strip().partition(" ")
    return Credential(CredentialKind.BEARER, token.strip() if scheme.lower() in BEARER_SCHEMES else value.strip())


def presented_credential(scope: Scope) -> Credential | None:
    """The one credential this request presents, or None."""
    for credential in _candidates(scope):
        if credential.value:
            return credential
    return None


def _candidates(scope: Scope) -> Iterable[Credential]:
    authorization = first_header(scope, "authorization")
    if authorization is not None and authorization.strip():
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() in BEARER_SCHEMES:
            yield Credential(CredentialKind.BEARER, token.strip())
        else:
            yield Credential(CredentialKind.UNSUPPORTED, authorization)
    yield Credential(CredentialKind.BEARER, subprotocol_credential(scope) or "")
    yield Credential(CredentialKind.API_KEY, (first_header(scope, KEY_HEADER) or "").strip())
    yield Credential(CredentialKind.API_KEY, (first_header(scope, XI_KEY_HEADER) or "").strip())
    query = query_params(scope)
    yield Credential(CredentialKind.API_KEY, query.get("api_key", ""))
    yield bearer_value(query.get("authorization", ""))
    yield Credential(CredentialKind.TICKET, query.get("ticket", ""))
    yield Credential(CredentialKind.PIN, (first_header(scope, PIN_HEADER) or "").strip())
    jar = cookies(scope)
    yield Credential(CredentialKind.SESSION_COOKIE, jar.get(SESSION_COOKIE, ""), from_cookie=True)
    yield Credential(CredentialKind.PIN, jar.get(PIN_COOKIE, ""), from_cookie=True)
