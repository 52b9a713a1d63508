"""Credentials that come inside a socket's first message, not its handshake.

ElevenLabs' clients may send their key in the first JSON message
(``{"text": " ", "xi_api_key": "..."}``), which the middleware cannot see
before the route runs. Such a route is declared ``consume_inband``: a client
that presents nothing at the handshake, and would be told ``API key required``
or ``PIN required``, is let in as a ``pending`` principal with no rights. The
route serves nothing until ``settle`` has judged the in-band credential with
the same ``AuthState.verify``, lockout and failure counting as the middleware;
a refusal is a close 1008 with the same exact detail (AUTH.md), or 1013 when
only an outage of the auth store stands in the way (``Refusal.close_code``).
"""

from __future__ import annotations

from .access import RouteClass
from .client_address import resolve_client
from .credentials import Credential
from .policy import (
    NOT_READY,
    RETRY_AFTER_STORE_S,
    STORE_UNAVAILABLE,
    TOO_MANY_ATTEMPTS,
    Refusal,
    judge_credential,
    without_store,
)
from .principal import Principal, PrincipalKind, Scope, principal_of
from .state import AuthState
from .store import StoreUnavailable


def is_pending(scope: Scope) -> bool:
    principal = principal_of(scope)
    return principal is not None and principal.kind is PrincipalKind.PENDING


async def settle(scope: Scope, state: AuthState, presented: Credential | None) -> Principal | Refusal:
    """The principal of a socket given the credential of its first message (None:
    it carried none). A loopback client needs none and is never judged by one; any
    other credential is judged exactly as one presented at the handshake, so an
    invalid one is final even where the handshake alone was enough."""
    principal = principal_of(scope)
    if principal is None:
        return Refusal(503, NOT_READY)
    if principal.kind is PrincipalKind.LOOPBACK:
        return principal
    if presented is None or not presented.value:
        if principal.kind is PrincipalKind.PENDING:
            if principal.pending_detail == STORE_UNAVAILABLE:
                return Refusal(503, STORE_UNAVAILABLE, RETRY_AFTER_STORE_S)
            return Refusal(401, principal.pending_detail)
        return principal
    client = resolve_client(scope, state.config.forwarded_allow_ips)
    try:
        retry_after = await state.failures.retry_after_s(client.host)
        if retry_after is not None:
            return Refusal(429, TOO_MANY_ATTEMPTS, retry_after)
        return await judge_credential(scope, presented, client, state)
    except StoreUnavailable as exc:
        # an in-band credential is explicit (never a cookie): no Origin stands in its way
        return without_store(RouteClass.CONSUME_INBAND, presented, client, state, True, exc)
