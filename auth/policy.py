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

log = logging.getLogger("voxgate.auth")

PIN_REQUIRED = "PIN required"
KEY_REQUIRED = "API key required"
LOOPBACK_REQUIRED = "loopback origin required"
ADMIN_GATE = "loopback origin or admin API key required"
ORIGIN_REJECTED = "browser origin rejected"
TOO_MANY_ATTEMPTS = "Too many authentication attempts"
NOT_READY = "authentication is not ready"
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

    def body(self) -> dict[str, str]:
        """The HTTP JSON body: the exact detail and its machine code."""
        return {"detail": self.detail, "code": self.code}


def decide(scope: Scope, route_class: RouteClass, state: AuthState) -> Principal | Refusal:
    config = state.config
    share = state.share.active
    if not host_allowed(scope, bind_host=config.bind_host, allowed_hosts=config.allowed_hosts,
                        share_host=share.host if share is not None else None):
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

    retry_after = state.failures.retry_after_s(client.host)
    if retry_after is not None:
        return Refusal(429, TOO_MANY_ATTEMPTS, retry_after)

    credential = presented_credential(scope)
    if credential is not None and credential.from_cookie and not ambient_ok:
        return Refusal(403, ORIGIN_REJECTED)
    if route_class is RouteClass.ADMIN:
        return _decide_admin(scope, credential, client, state)
    if credential is not None:
        return judge_credential(scope, credential, client, state)
    decision = _no_credential(client, state, ambient_ok)
    if route_class is RouteClass.CONSUME_INBAND and isinstance(decision, Refusal) \
            and decision.detail in (PIN_REQUIRED, KEY_REQUIRED):
        # a credential could still help and may come in the first message: nothing is
        # served before auth/inband.py accepts it
        return Principal(PrincipalKind.PENDING, client.host, pending_detail=decision.detail)
    return decision


def missing_credential_refusal(state: AuthState) -> Refusal:
    """What a non-loopback client without a credential is told on a consume route
    when neither the trusted network nor --allow-anonymous lets it in."""
    if state.pin_active:
        return Refusal(401, PIN_REQUIRED)
    if state.config.has_key:
        return Refusal(401, KEY_REQUIRED)
    return Refusal(403, LOOPBACK_REQUIRED)


def admin_refusal(state: AuthState) -> Refusal:
    """The admin gate's answer: whether the key could help decides the detail."""
    if state.config.server_mode and state.config.has_key:
        return Refusal(403, ADMIN_GATE)
    return Refusal(403, LOOPBACK_REQUIRED)


def _decide_admin(scope: Scope, credential: Credential | None, client: ClientAddress,
                  state: AuthState) -> Principal | Refusal:
    gate = admin_refusal(state)
    # Without a key that can satisfy the gate, and for a PIN (which never can),
    # nothing is checked: no answer could differ, so none is counted either.
    if credential is None or gate.detail == LOOPBACK_REQUIRED or credential.kind.is_pin:
        return gate
    judged = judge_credential(scope, credential, client, state)
    if isinstance(judged, Refusal):
        return judged
    return judged if judged.may_admin else gate


def judge_credential(scope: Scope, credential: Credential, client: ClientAddress,
                     state: AuthState) -> Principal | Refusal:
    """Check one presented credential; a failure is counted and its refusal returned."""
    pin_was_active = state.pin_active  # a failed check may revoke it
    principal = state.verify(credential, client.host, path=scope.get("path", ""),
                             websocket=scope["type"] == "websocket")
    if principal is not None:
        return principal
    state.failures.record_failure(client.host)
    log.info("auth: invalid %s credential from %s for %s", credential.kind.value, client.host, scope.get("path", ""))
    if credential.kind is not CredentialKind.PIN:
        return Refusal(401, KEY_REQUIRED)
    if pin_was_active:
        return Refusal(401, PIN_REQUIRED)
    # No PIN exists, so asking for one would offer a login that cannot succeed.
    return Refusal(401, KEY_REQUIRED) if state.config.has_key else Refusal(403, LOOPBACK_REQUIRED)


def _no_credential(client: ClientAddress, state: AuthState, ambient_ok: bool) -> Principal | Refusal:
    config = state.config
    if client.in_networks(config.trusted_networks):
        return Principal(PrincipalKind.TRUSTED_NETWORK, client.host) if ambient_ok else Refusal(403, ORIGIN_REJECTED)
    if config.allow_anonymous and not config.has_key and not state.pin_active:
        return Principal(PrincipalKind.ANONYMOUS, client.host)
    return missing_credential_refusal(state)
