"""Credentials that come inside a socket's first message, not its handshake.

ElevenLabs' clients may send their key in the first JSON message
(``{"text": " ", "xi_api_key": "..."}``), which the middleware cannot see
before the route runs. Such a route is declared ``consume_inband``: a client
that presents nothing at the handshake, and would be told ``API key required``
or ``PIN required``, is let in as a ``pending`` principal with no rights. The
route serves nothing until ``settle`` has judged the in-band credential with
the same ``AuthState.verify``, lockout and failure counting as the middleware;
a refusal is a close 1008 with the same exact detail (AUTH.md).
"""

from __future__ import annotations

from .client_address import resolve_client
from .credentials import Credential
from .policy import NOT_READY, TOO_MANY_ATTEMPTS, Refusal, judge_credential
from .principal import Principal, PrincipalKind, Scope, principal_of
from .state import AuthState


def is_pending(scope: Scope) -> bool:
    principal = principal_of(scope)
    return principal is not None and principal.kind is PrincipalKind.PENDING


def settle(scope: Scope, state: AuthState, presented: Credential | None) -> Principal | Refusal:
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
            return Refusal(401, principal.pending_detail)
        return principal
    client = resolve_client(scope, state.config.forwarded_allow_ips)
    retry_after = state.failures.retry_after_s(client.host)
    if retry_after is not None:
        return Refusal(429, TOO_MANY_ATTEMPTS, retry_after)
    return judge_credential(scope, presented, client, state)
