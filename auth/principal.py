"""Who is asking, as the middleware recorded it in ``scope["voxgate.principal"]``."""

from __future__ import annotations

import enum
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

SCOPE_KEY = "voxgate.principal"

Scope = MutableMapping[str, Any]  # an ASGI connection scope


class PrincipalKind(str, enum.Enum):
    LOOPBACK = "loopback"
    API_KEY = "api_key"
    SESSION = "session"  # a session token minted from the API key
    PIN_SESSION = "pin_session"  # a session token minted from the PIN
    TICKET = "ticket"
    PIN = "pin"
    TRUSTED_NETWORK = "trusted_network"
    ANONYMOUS = "anonymous"  # a public route, or a consume route under --allow-anonymous
    PENDING = "pending"  # no rights yet: an in-band credential must still come (auth/inband.py)


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind
    client: str  # the client address after trusted proxy headers
    may_admin: bool = False
    pending_detail: str = ""  # PENDING: the refusal's detail if no acceptable credential comes


def principal_of(scope: Scope) -> Principal | None:
    """The principal the middleware recorded, or None outside the middleware."""
    principal = scope.get(SCOPE_KEY)
    return principal if isinstance(principal, Principal) else None
