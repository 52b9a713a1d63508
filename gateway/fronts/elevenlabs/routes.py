"""The ElevenLabs front's routes, each declared with its access class. The
sockets are ``consume_inband``: the key may come in their first message
(``xi_api_key``), which auth/inband.py settles before anything is served."""

from __future__ import annotations

from starlette.routing import BaseRoute

from auth.access import RouteClass, http_route, ws_route
from gateway.fronts.elevenlabs.sockets import multi_stream_input, stream_input
from gateway.fronts.elevenlabs.speech import text_to_speech

PREFIX = "/v1/text-to-speech/{voice_id}"


def elevenlabs_routes() -> list[BaseRoute]:
    return [
        ws_route(f"{PREFIX}/stream-input", stream_input, access=RouteClass.CONSUME_INBAND,
                 name="elevenlabs_stream_input"),
        ws_route(f"{PREFIX}/multi-stream-input", multi_stream_input, access=RouteClass.CONSUME_INBAND,
                 name="elevenlabs_multi_stream_input"),
        http_route(f"{PREFIX}/stream", text_to_speech, access=RouteClass.CONSUME, methods=["POST"],
                   name="elevenlabs_stream"),
        http_route(PREFIX, text_to_speech, access=RouteClass.CONSUME, methods=["POST"], name="elevenlabs_convert"),
    ]
