"""The Flux front's route, declared with its access class."""

from __future__ import annotations

from starlette.routing import BaseRoute

from auth.access import RouteClass, ws_route
from gateway.fronts.flux.listen import flux_socket


def flux_routes() -> list[BaseRoute]:
    return [ws_route("/v2/listen", flux_socket, access=RouteClass.CONSUME)]
