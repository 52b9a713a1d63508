"""The credential exchange and LAN-sharing routes, each declared with its class.

- ``POST /v1/auth/session`` (public: it checks the key or PIN itself, through
  the same policy functions and lockout as the middleware)
- ``DELETE /v1/auth/session`` (public: revoking needs no rights)
- ``POST /v1/auth/ticket`` (consume: any valid credential)
- ``GET /v1/auth/me`` (public: who the caller is, judged like a consume route)
- ``POST|GET|DELETE /v1/admin/share`` (admin)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from . import codes
from .access import RouteClass, http_route
from .body import BodyInvalid, BodyTooLarge, parse_json_object, read_body
from .client_address import resolve_client
from .credentials import PIN_COOKIE, SESSION_COOKIE, Credential, CredentialKind, presented_credential
from .origin import origin_acceptable
from .policy import (
    ORIGIN_REJECTED,
    TOO_MANY_ATTEMPTS,
    Refusal,
    decide,
    judge_credential,
    missing_credential_refusal,
    store_refusal,
)
from .principal import PrincipalKind, principal_of
from .share import VIA_SHARE_SCOPE_KEY, ShareUnavailable
from .state import SOURCE_KEY, SOURCE_PIN, AuthState, owner_of
from .store import StoreUnavailable
from .tokens import QuotaFull

MAX_BODY_BYTES = 4096
TRANSPORTS = ("cookie", "bearer")
MINTING_KINDS = {PrincipalKind.API_KEY: SOURCE_KEY, PrincipalKind.PIN: SOURCE_PIN}


class BodyError(Exception):
    """The request body cannot be used; the message says which field and why."""


class BodyRefused(Exception):
    """The request body is over the size limit (413)."""


def _detail(status: int, detail: str, code: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "code": code}, status_code=status)


def _refusal(refusal: Refusal) -> JSONResponse:
    headers = {"Retry-After": str(refusal.retry_after_s)} if refusal.retry_after_s is not None else None
    return JSONResponse(refusal.body(), status_code=refusal.status, headers=headers)


Endpoint = Callable[[Request], Awaitable[Response]]


def needs_store(endpoint: Endpoint) -> Endpoint:
    """An unreachable auth store answers 503 ``authentication store unavailable``."""

    @functools.wraps(endpoint)
    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except StoreUnavailable as exc:
            return _refusal(store_refusal(request.state.auth, exc))
        except QuotaFull as exc:
            return _detail(429, str(exc), codes.TOO_MANY_TOKENS)

    return wrapped


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        return parse_json_object(await read_body(request, MAX_BODY_BYTES))
    except BodyTooLarge as exc:
        raise BodyRefused(str(exc)) from None
    except BodyInvalid as exc:
        raise BodyError(str(exc)) from None


def _cookie_header(name: str, value: str, *, secure: bool, max_age_s: int | None) -> str:
    parts = [f"{name}={value}", "HttpOnly", "SameSite=Strict", "Path=/"]
    if max_age_s is not None:
        parts.append(f"Max-Age={max_age_s}")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


@needs_store
async def create_session(request: Request) -> Response:
    state: AuthState = request.state.auth
    scope = request.scope
    client = resolve_client(scope, state.config.forwarded_allow_ips)
    retry_after = await state.failures.retry_after_s(client.host)
    if retry_after is not None:
        return _refusal(Refusal(429, TOO_MANY_ATTEMPTS, retry_after))
    try:
        body = await _json_object(request)
        transport = body.get("transport", "cookie")
        if transport not in TRANSPORTS:
            raise BodyError('transport must be "cookie" or "bearer"')
        pin = body.get("pin")
        if pin is not None and not isinstance(pin, str):
            raise BodyError("pin must be a string of 6 digits")
    except BodyError as exc:
        return _detail(400, str(exc), codes.BAD_REQUEST)
    except BodyRefused as exc:
        return _detail(413, str(exc), codes.TOO_LARGE)

    if pin is not None:
        credential: Credential | None = Credential(CredentialKind.PIN, pin)
    else:
        credential = presented_credential(scope)
    if credential is None or not credential.value:
        return _refusal(await missing_credential_refusal(state))
    if credential.from_cookie and not origin_acceptable(scope, client.scheme, state.config.allowed_origins):
        return _refusal(Refusal(403, ORIGIN_REJECTED))
    judged = await judge_credential(scope, credential, client, state)
    if isinstance(judged, Refusal):
        return _refusal(judged)
    source = MINTING_KINDS.get(judged.kind)
    if source is None:
        return _detail(400, "a session is minted from the API key or the PIN; present one of them",
                       codes.BAD_REQUEST)

    secure = client.scheme == "https"
    if transport == "cookie" and source == SOURCE_PIN:  # the PIN itself is the cookie: no session is kept
        response = Response(status_code=204)
        response.headers.append("set-cookie",
                                _cookie_header(PIN_COOKIE, credential.value, secure=secure, max_age_s=None))
        return response
    token = await state.mint_session(source, owner_of(judged))  # QuotaFull: 429 (needs_store)
    if transport == "bearer":
        return JSONResponse({"token": token, "expires_in": int(state.config.session_ttl_s)}, status_code=201)
    response = Response(status_code=204)
    response.headers.append("set-cookie", _cookie_header(SESSION_COOKIE, token, secure=secure,
                                                         max_age_s=int(state.config.session_ttl_s)))
    return response


@needs_store
async def delete_session(request: Request) -> Response:
    state: AuthState = request.state.auth
    credential = presented_credential(request.scope)
    if credential is not None and credential.kind in (CredentialKind.BEARER, CredentialKind.SESSION_COOKIE):
        await state.sessions.revoke(credential.value)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        await state.sessions.revoke(token)
    response = Response(status_code=204)
    for name in (SESSION_COOKIE, PIN_COOKIE):
        response.headers.append("set-cookie", _cookie_header(name, "", secure=False, max_age_s=0))
    return response


@needs_store
async def who_am_i(request: Request) -> Response:
    """``{"principal", "admin", "session"}``: what the caller's credential makes it on a
    consume route (``principal`` null when it would be refused), whether it may use
    the admin routes, and whether it holds a session that signing out would end.

    The credential is judged exactly as a consume route judges it, lockout and
    failure counting included, so this route is no cheaper oracle for guessing
    keys or PINs than any other. A locked-out caller gets the same 429.
    """
    state: AuthState = request.state.auth
    scope = cast("dict[str, Any]", request.scope)  # the policy functions take the plain ASGI dict
    client = resolve_client(scope, state.config.forwarded_allow_ips)
    credential = presented_credential(scope)
    if client.is_loopback:
        # Loopback needs no credential; a session cookie it carries is only looked
        # up (a pure read), never counted as a failure.
        token = request.cookies.get(SESSION_COOKIE, "")
        try:
            session = bool(token) and await state.verify(
                Credential(CredentialKind.SESSION_COOKIE, token, from_cookie=True), client.host,
                path=scope.get("path", ""), websocket=False) is not None
        except StoreUnavailable:  # loopback needs no session: it is served all the same
            session = False
        return _identity(PrincipalKind.LOOPBACK.value, admin=True, session=session)
    judged = await decide(scope, RouteClass.CONSUME, state)
    if isinstance(judged, Refusal):
        if judged.status in (429, 503):
            return _refusal(judged)
        return _identity(None, admin=False, session=False)
    session = judged.kind in (PrincipalKind.SESSION, PrincipalKind.PIN_SESSION) or (
        judged.kind is PrincipalKind.PIN and credential is not None and credential.from_cookie)
    return _identity(judged.kind.value, admin=judged.may_admin, session=session)


def _identity(principal: str | None, *, admin: bool, session: bool) -> JSONResponse:
    return JSONResponse({"principal": principal, "admin": admin, "session": session},
                        headers={"Cache-Control": "no-store"})


@needs_store
async def create_ticket(request: Request) -> Response:
    state: AuthState = request.state.auth
    allowed = state.config.ticket_paths
    try:
        body = await _json_object(request)
        path = body.get("path")
        if not isinstance(path, str) or path not in allowed:
            raise BodyError(f"path must be one of: {', '.join(allowed)}")
    except BodyError as exc:
        return _detail(400, str(exc), codes.BAD_REQUEST)
    except BodyRefused as exc:
        return _detail(413, str(exc), codes.TOO_LARGE)
    principal = principal_of(request.scope)
    # QuotaFull: 429 (needs_store)
    ticket = await state.mint_ticket(path, owner_of(principal) if principal is not None else "unknown")
    return JSONResponse({"ticket": ticket, "expires_in": int(state.config.ticket_ttl_s)}, status_code=201)


@needs_store
async def start_share(request: Request) -> Response:
    state: AuthState = request.state.auth
    try:
        info = await state.start_sharing(request.scope["app"])
    except ShareUnavailable as exc:
        return _detail(503, str(exc), codes.SHARE_UNAVAILABLE)
    return JSONResponse({"pin": info.pin, "url": info.url, "port": info.port, "fingerprint": info.fingerprint or None},
                        status_code=201)


@needs_store
async def share_status(request: Request) -> Response:
    state: AuthState = request.state.auth
    info = await state.share.current()
    if info is None:
        return JSONResponse({"enabled": False, "url": None, "port": None, "fingerprint": None})
    body: dict[str, Any] = {"enabled": True, "url": info.url, "port": info.port,
                            "fingerprint": info.fingerprint or None}
    principal = principal_of(request.scope)
    if principal is not None and principal.may_admin:
        body["pin"] = info.pin
    else:  # the URL carries the PIN too
        body["url"] = info.url.split("?", 1)[0]
    return JSONResponse(body)


@needs_store
async def stop_share(request: Request) -> Response:
    state: AuthState = request.state.auth
    await state.stop_sharing(wait=not request.scope.get(VIA_SHARE_SCOPE_KEY, False))
    return Response(status_code=204)


def auth_routes() -> list[BaseRoute]:
    """The routes of the credential exchange and LAN sharing, classes declared."""
    return [
        http_route("/v1/auth/session", create_session, access=RouteClass.PUBLIC, methods=["POST"],
                   name="auth_session_create"),
        http_route("/v1/auth/session", delete_session, access=RouteClass.PUBLIC, methods=["DELETE"],
                   name="auth_session_delete"),
        http_route("/v1/auth/me", who_am_i, access=RouteClass.PUBLIC, methods=["GET"], name="auth_me"),
        http_route("/v1/auth/ticket", create_ticket, access=RouteClass.CONSUME, methods=["POST"], name="auth_ticket"),
        http_route("/v1/admin/share", start_share, access=RouteClass.ADMIN, methods=["POST"], name="share_start"),
        http_route("/v1/admin/share", share_status, access=RouteClass.ADMIN, methods=["GET"], name="share_status"),
        http_route("/v1/admin/share", stop_share, access=RouteClass.ADMIN, methods=["DELETE"], name="share_stop"),
    ]
