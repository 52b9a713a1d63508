"""Route access classes. A route declares one; the middleware enforces it."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match, Mount, Route, WebSocketRoute

from .principal import Scope


class RouteClass(str, enum.Enum):
    PUBLIC = "public"  # anyone: /health, the static client, the credential exchange
    CONSUME = "consume"  # speech routes: key, session, ticket, PIN, trusted network, loopback
    ADMIN = "admin"  # loopback; in server mode also the API key or a session minted from it
    # consume, where the credential may also come in the socket's first message (ElevenLabs'
    # xi_api_key): a client with none at the handshake is let in pending (auth/inband.py)
    CONSUME_INBAND = "consume_inband"


# ---- declaring and looking up a route's class

ACCESS_ATTR = "voxgate_access"


def http_route(path: str, endpoint: Callable[..., Any], *, access: RouteClass,
               methods: Sequence[str] | None = None, name: str | None = None) -> Route:
    r = Route(path, endpoint, methods=list(methods) if methods else None, name=name)
    setattr(r, ACCESS_ATTR, access)
    return r


def ws_route(path: str, endpoint: Callable[..., Any], *, access: RouteClass, name: str | None = None) -> WebSocketRoute:
    r = WebSocketRoute(path, endpoint, name=name)
    setattr(r, ACCESS_ATTR, access)
    return r


def mount(path: str, app: Any, *, access: RouteClass, name: str | None = None) -> Mount:
    m = Mount(path, app=app, name=name)
    setattr(m, ACCESS_ATTR, access)
    return m


def make_classifier(routes: Sequence[BaseRoute],
                    default: RouteClass = RouteClass.CONSUME) -> Callable[[Scope], RouteClass]:
    """Return ``classify(scope)``: the class of the route that will serve the scope.

    A path that matches no declared route (a 404 to be) counts as ``default``, so
    an unknown path never reveals more to an anonymous client than a real one.
    A route matched on its path but not its method keeps its class.
    """

    def classify(scope: Scope) -> RouteClass:
        partial: RouteClass | None = None
        for r in routes:
            match, _ = r.matches(scope)
            if match == Match.FULL:
                return getattr(r, ACCESS_ATTR, default)
            if match == Match.PARTIAL and partial is None:
                partial = getattr(r, ACCESS_ATTR, default)
        return partial if partial is not None else default

    return classify
