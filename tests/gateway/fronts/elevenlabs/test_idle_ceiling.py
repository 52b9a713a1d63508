"""ElevenLabs' ``inactivity_timeout`` (up to 180 s) is held to the gateway's idle
timeout, the ceiling of every vendor timeout: LiveKit's plugin sends 180 on
every socket, so a larger value is applied as the ceiling, not refused; the
close reason says so and the first such socket is logged, once."""

from __future__ import annotations

import logging

from gateway.fronts.elevenlabs.params import parse_socket_params
from tests.gateway.fronts.elevenlabs.reading import MULTI, STREAM
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive

CAPPED = "no text received for 1 s (inactivity_timeout 180 is capped at the server's idle timeout)"
LOGGED = ("ElevenLabs sockets ask for inactivity_timeout=180 s; it is capped at VOXGATE_IDLE_TIMEOUT_S=1 s "
          "(logged once)")


def test_the_ceiling_applies_to_a_larger_value_only():
    asked = parse_socket_params({"inactivity_timeout": "180"})
    capped = asked.capped(30.0)
    assert (capped.inactivity_timeout_s, capped.requested_inactivity_s, capped.inactivity_capped) == (30.0, 180, True)
    assert capped.idle_reason() == ("no text received for 30 s (inactivity_timeout 180 is capped at the server's "
                                    "idle timeout)")
    within = parse_socket_params({"inactivity_timeout": "20"}).capped(30.0)
    assert (within.inactivity_timeout_s, within.inactivity_capped) == (20.0, False)
    assert within.idle_reason() == "no text received for 20 s (inactivity_timeout)"


def test_a_socket_asking_for_180_s_closes_at_the_idle_timeout_and_is_logged_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="voxgate.fronts.elevenlabs")
    with tts_client(tmp_path, idle_timeout_s=1) as client:
        for _ in range(2):
            with client.websocket_connect(MULTI + "?inactivity_timeout=180") as ws:
                assert close_code(ws) == (4408, CAPPED)
    assert [r.getMessage() for r in caplog.records if r.name == "voxgate.fronts.elevenlabs"] == [LOGGED]


def test_a_context_asking_for_180_s_idles_out_at_the_idle_timeout(tmp_path):
    with tts_client(tmp_path, idle_timeout_s=1) as client:
        with client.websocket_connect(MULTI + "?inactivity_timeout=180") as ws:
            ws.send_json({"text": " ", "context_id": "a"})
            assert receive(ws) == {"isFinal": True, "contextId": "a"}  # its slot is free again
            assert close_code(ws) == (4408, CAPPED)
        with client.websocket_connect(STREAM + "?inactivity_timeout=180") as ws:
            ws.send_json({"text": " "})
            assert close_code(ws) == (4408, "idle: no message for 1 s (send keepalive to stay open)")
