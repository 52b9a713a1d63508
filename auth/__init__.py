"""Access control for voxgate: who may do what, decided before any route runs.

The app builds an ``AuthState`` in its lifespan, wraps itself in
``AuthMiddleware`` and adds ``auth_routes()``. Routes declare their class with
``auth.access``; the policy (``auth.policy``) is the table of AUTH.md.
"""

from __future__ import annotations

from .access import RouteClass
from .bind import refuse_unsafe_bind
from .config import AuthConfig
from .middleware import AuthMiddleware
from .principal import SCOPE_KEY, Principal, PrincipalKind, principal_of
from .routes import auth_routes
from .share import ShareListener
from .state import AuthState

__all__ = [
    "SCOPE_KEY",
    "AuthConfig",
    "AuthMiddleware",
    "AuthState",
    "Principal",
    "PrincipalKind",
    "RouteClass",
    "ShareListener",
    "auth_routes",
    "principal_of",
    "refuse_unsafe_bind",
]
