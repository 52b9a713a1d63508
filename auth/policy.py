"""The decision: may this request reach its route? One function, both transports.

``decide`` is the whole table of AUTH.md. It returns the Principal to record or
the Refusal to send; the middleware only translates a Refusal to the wire.

Order of checks:
0. the Host must be one this server answers to (auth/hosts.py), on every route;
1. public routes pass (nothing is checked, nothing counted);
2. loopback clients may everything (they present nothing, so lockout is moot);
3. a locked-out client is refused before any credential is looked at;
4. a credential, if presented, decides alone (an invalid one is final);
5. with none: the trusted network, then whatever credential could help; on a
   ``consume_inband`` route a client whose refusal would ask for a key or PIN is
   let in *pending* instead, and the route settles it (auth/inband.py).
Ambient authority (a cookie, or the loopback / trusted-network address) also
needs an acceptable Origin on mutations and WebSocket upgrades (see origin.py).

The auth store may be a network store (Redis, shared by replicas). When it is
unreachable the decision fails closed for what needs it (a session, a ticket,
a PIN, a client without a credential: 503 ``authentication store unavailable``)
and goes on for what does not: loopback, the API key, the trusted network.
Failed attempts are counted in the process meanwhile (auth/lockout.py), so the
lockout holds through an outage with the same limits.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from . import codes
from .access import RouteClass
from .client_address import ClientAddress, resolve_client
from .credentials import Credential, CredentialKind, presented_credential
from .hosts import host_allowed
from .origin import needs_origin_check, origin_acceptable
from .principal import Principal, PrincipalKind, Scope
from .state import AuthState
from .store import StoreUnavailable

log = logging.getLogger("voxgate.auth")

PIN_REQUIRED = "PIN required"
KEY_REQUIRED = "API key required"
LOOPBACK_REQUIRED = "loopback origin required"
ADMIN_GATE = "loopback origin or admin API key required"
ORIGIN_REJECTED = "browser origin rejected"
TOO_MANY_ATTEMPTS = "Too many authentication attempts"
NOT_READY = "authentication is not ready"
STORE_UNAVAILABLE = "authentication store unavailable"
RETRY_AFTER_STORE_S = 1
STORE_WARNING_EVERY_S = 10.0  # an outage is logged at most this often, not once per request
CLOSE_POLICY_VIOLATION = 1008
CLOSE_TRY_AGAIN = 1013
HOST_REJECTED = "host not allowed: VOXGATE_ALLOWED_HOSTS lists the names this server answers to"
UNKNOWN_PROXY_WARNING_S = 60.0  # at most one warning a minute about an unconfigured local proxy

# The machine code sent next to each detail (auth/codes.py).
DETAIL_CODES = {
    PIN_REQUIRED: codes.PIN_REQUIRED,
    KEY_REQUIRED: codes.API_KEY_REQUIRED,
    LOOPBACK_REQUIRED: codes.LOOPBACK_REQUIRED,
    ADMIN_GATE: codes.ADMIN_REQUIRED,
    ORIGIN_REJECTED: codes.ORIGIN_REJECTED,
    TOO_MANY_ATTEMPTS: codes.TOO_MANY_ATTEMPTS,
    NOT_READY: codes.AUTH_NOT_READY,
    STORE_UNAVAILABLE: codes.AUTH_STORE_UNAVAILABLE,
    HOST_REJECTED: codes.HOST_REJECTED,
}


@dataclass(frozen=True)
class Refusal:
    status: int  # HTTP status; a WebSocket always closes 1008 with ``detail`` as reason
    detail: str
    retry_after_s: int | None = None

    @property
    def code(self) -> str:
        return DETAIL_CODES[self.detail]

    @property
    def close_code(self) -> int:
        """How a WebSocket is closed with this refusal: 1008, or 1013 (retry) when
        only an outage of the auth store stands in the way."""
        return CLOSE_TRY_AGAIN if self.detail == STORE_UNAVAILABLE else CLOSE_POLICY_VIOLATION

    def body(self) -> dict[str, str]:
        """The HTTP JSON body: the exact detail and its machine code."""
        return {"detail": self.detail, "code": self.code}


def store_refusal(state: AuthState, exc: StoreUnavailable) -> Refusal:
    if state.warning_due("store-unavailable", STORE_WARNING_EVERY_S):
        log.warning("auth: %s; refusing what needs it (sessions, tickets, the PIN)", exc)
    return Refusal(503, STORE_UNAVAILABLE, RETRY_AFTER_STORE_S)


async def decide(scope: Scope, route_class: RouteClass, state: AuthState) -> Principal | Refusal:
    config = state.config
    if not host_allowed(scope, bind_host=config.bind_host, allowed_hosts=config.allowed_hosts,
                        share_host=state.share.listening_host):
        return Refusal(400, HOST_REJECTED)
    client = resolve_client(scope, config.forwarded_allow_ips)
    if client.via_unknown_proxy and state.warning_due("unknown-proxy", UNKNOWN_PROXY_WARNING_S):
        log.warning("auth: a loopback client sent X-Forwarded-For/Forwarded headers, but no proxy is trusted: "
                    "treating it as a remote client. A reverse proxy on this host must be named in "
                    "VOXGATE_FORWARDED_ALLOW_IPS (and run the gateway in server mode with an API key)")
    if route_class is RouteClass.PUBLIC:
        kind = PrincipalKind.LOOPBACK if client.is_loopback else PrincipalKind.ANONYMOUS
        return Principal(kind, client.host, may_admin=client.is_loopback)

    check_origin = needs_origin_check(scope)
    if client.is_loopback:  # needs no credential, so it has nothing to be locked out of
        if check_origin and not origin_acceptable(scope, client.scheme, config.allowed_origins,
                                                  own_must_be_loopback=True):
            return Refusal(403, ORIGIN_REJECTED)
        return Principal(PrincipalKind.LOOPBACK, client.host, may_admin=True)
    ambient_ok = not check_origin or origin_acceptable(scope, client.scheme, config.allowed_origins)
    credential = presented_credential(scope)
    try:
        retry_after = await state.failures.retry_after_s(client.host)
        if retry_after is not None:
            return Refusal(429, TOO_MANY_ATTEMPTS, retry_after)
        if credential is not None and credential.from_cookie and not ambient_ok:
            return Refusal(403, ORIGIN_REJECTED)
        if route_class is RouteClass.ADMIN:
            return await _decide_admin(scope, credential, client, state)
        if credential is not None:
            return await judge_credential(scope, credential, client, state)
        decision = await _no_credential(client, state, ambient_ok)
    except StoreUnavailable as exc:
        return without_store(route_class, credential, client, state, ambient_ok, exc)
    if route_class is RouteClass.CONSUME_INBAND and isinstance(decision, Refusal) \
            and decision.detail in (PIN_REQUIRED, KEY_REQUIRED):
        # a credential could still help and may come in the first message: nothing is
        # served before auth/inband.py accepts it
        return Principal(PrincipalKind.PENDING, client.host, pending_detail=decision.detail)
    return decision


def without_store(route_class: RouteClass, credential: Credential | None, client: ClientAddress,
                   state: AuthState, ambient_ok: bool, exc: StoreUnavailable) -> Principal | Refusal:
    """The decision while the store is unreachable: only what needs no store passes.
    A credential that can be judged without the store (the key, a wrong key) never
    gets here: ``judge_credential`` judged and counted it."""
    if credential is not None and credential.from_cookie and not ambient_ok:
        return Refusal(403, ORIGIN_REJECTED)
    if credential is not None and credential.kind in (CredentialKind.BEARER, CredentialKind.API_KEY) \
            and state.key_matches(credential.value):
        principal = state.key_principal(client.host)
        if route_class is RouteClass.ADMIN and not principal.may_admin:
            return admin_refusal(state)
        return principal
    if route_class is RouteClass.ADMIN and (credential is None or credential.kind.is_pin):
        return admin_refusal(state)  # no credential could help: no store is needed to say so
    if credential is None and client.in_networks(state.config.trusted_networks):
        return Principal(PrincipalKind.TRUSTED_NETWORK, client.host) if ambient_ok else Refusal(403, ORIGIN_REJECTED)
    if credential is None and route_class is RouteClass.CONSUME_INBAND and state.config.has_key:
        # the key, which needs no store, may still come in the first message
        return Principal(PrincipalKind.PENDING, client.host, pending_detail=STORE_UNAVAILABLE)
    return store_refusal(state, exc)


async def missing_credential_refusal(state: AuthState) -> Refusal:
    """What a non-loopback client without a credential is told on a consume route
    when neither the trusted network nor --allow-anonymous lets it in."""
    if await state.pin_active():
        return Refusal(401, PIN_REQUIRED)
    if state.config.has_key:
        return Refusal(401, KEY_REQUIRED)
    return Refusal(403, LOOPBACK_REQUIRED)


def admin_refusal(state: AuthState) -> Refusal:
    """The admin gate's answer: whether the key could help decides the detail."""
    if state.config.server_mode and state.config.has_key:
        return Refusal(403, ADMIN_GATE)
    return Refusal(403, LOOPBACK_REQUIRED)


async def _decide_admin(scope: Scope, credential: Credential | None, client: ClientAddress,
                        state: AuthState) -> Principal | Refusal:
    gate = admin_refusal(state)
    # Without a key that can satisfy the gate, and for a PIN (which never can),
    # nothing is checked: no answer could differ, so none is counted either.
    if credential is None or gate.detail == LOOPBACK_REQUIRED or credential.kind.is_pin:
        return gate
    judged = await judge_credential(scope, credential, client, state)
    if isinstance(judged, Refusal):
        return judged
    return judged if judged.may_admin else gate


async def judge_credential(scope: Scope, credential: Credential, client: ClientAddress,
                           state: AuthState) -> Principal | Refusal:
    """Check one presented credential; a failure is counted and its refusal returned.
    Raises ``StoreUnavailable`` when the store is needed and unreachable."""
    pin_was_active = False
    if credential.kind is CredentialKind.API_KEY and not state.key_matches(credential.value):
        principal = None  # a wrong key needs no store to be judged
    else:
        pin_was_active = credential.kind is CredentialKind.PIN and await state.pin_active()  # a check may revoke it
        try:
            principal = await state.verify(credential, client.host, path=scope.get("path", ""),
                                           websocket=scope["type"] == "websocket")
        except StoreUnavailable:
            if credential.kind is CredentialKind.BEARER and state.key_looks_like_session():
                # 503 rather than 200 still tells this guess from the key: count it as a wrong key
                await state.failures.record_failure(client.host)
            raise
    if principal is not None:
        return principal
    await state.failures.record_failure(client.host)  # in the process while the store is unreachable
    log.info("auth: invalid %s credential from %s for %s", credential.kind.value, client.host, scope.get("path", ""))
    if credential.kind is not CredentialKind.PIN:
        return Refusal(401, KEY_REQUIRED)
    if pin_was_active:
        return Refusal(401, PIN_REQUIRED)
    # No PIN exists, so asking for one would offer a login that cannot succeed.
    return Refusal(401, KEY_REQUIRED) if state.config.has_key else Refusal(403, LOOPBACK_REQUIRED)


async def _no_credential(client: ClientAddress, state: AuthState, ambient_ok: bool) -> Principal | Refusal:
    config = state.config
    if client.in_networks(config.trusted_networks):
        return Principal(PrincipalKind.TRUSTED_NETWORK, client.host) if ambient_ok else Refusal(403, ORIGIN_REJECTED)
    if config.allow_anonymous and not config.has_key and not await state.pin_active():
        return Principal(PrincipalKind.ANONYMOUS, client.host)
    return await missing_credential_refusal(state)
