"""The Deepgram front's routes, each declared with its access class."""

from __future__ import annotations

from starlette.routing import BaseRoute

from auth.access import RouteClass, ws_route
from gateway.fronts.deepgram.listen import listen_socket
from gateway.fronts.deepgram.speak import speak_socket
from gateway.fronts.deepgram.speak_v2 import speak_v2_socket


def deepgram_routes() -> list[BaseRoute]:
    return [
        ws_route("/v1/listen", listen_socket, access=RouteClass.CONSUME),
        ws_route("/v1/speak", speak_socket, access=RouteClass.CONSUME),
        ws_route("/v2/speak", speak_v2_socket, access=RouteClass.CONSUME),
    ]
