"""Fair shares of dictation streams: one client address holds at most its
per-client limit (a quarter of VOXGATE_MAX_DICTATION_STREAMS by default)
across every front that opens one (/v1/dictation, Deepgram's /v1/listen,
OpenAI Realtime); past it each front refuses the way it refuses over capacity
(1013), naming the per-client limit; another client still gets a stream; and
a stream's slot is released however it ends, errors included."""

from __future__ import annotations

import ipaddress
from typing import Any

from gateway.registry import SessionRegistry
from tests.gateway.fronts.openai_realtime.talk import URL as REALTIME
from tests.gateway.fronts.openai_realtime.talk import opened
from tests.gateway.helpers import dictation_client, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive

ATTACKER, OTHER = "203.0.113.7", "198.51.100.2"
PER_CLIENT = "too many dictation streams from one client (limit 2 per client); end one of yours or try again later"


def behind_proxy(tmp_path: Any, **settings: Any) -> Any:
    """A gateway behind a trusted proxy on loopback, whose clients' networks may consume without a credential."""
    networks = (ipaddress.ip_network("203.0.113.0/24"), ipaddress.ip_network("198.51.100.0/24"))
    return dictation_client(tmp_path, FakeSidecar(), forwarded_allow_ips=(ipaddress.ip_network("127.0.0.1/32"),),
                            trusted_networks=networks, **settings)


def via(address: str) -> dict[str, Any]:
    return {"headers": {"X-Forwarded-For": address}}


def streams(client: Any, share: str | None = None) -> int:
    registry: SessionRegistry = client.app_state["sessions"]
    return registry.count("dictation", share)


def test_one_client_holds_its_share_across_fronts_and_another_client_still_gets_a_stream(tmp_path):
    with behind_proxy(tmp_path) as client:  # VOXGATE_MAX_DICTATION_STREAMS=8: 2 per client
        with client.websocket_connect("/v1/dictation", **via(ATTACKER)) as first, \
                client.websocket_connect("/v1/listen", **via(ATTACKER)):
            assert receive(first)["type"] == "ready"
            wait_for(lambda: streams(client, ATTACKER) == 2, "the Deepgram stream is registered")
            with client.websocket_connect(REALTIME, **via(ATTACKER)) as third:
                error = receive(third)["error"]
                assert (error["type"], error["code"], error["message"]) == ("server_error", "over_capacity",
                                                                            PER_CLIENT)
                assert close_code(third) == (1013, PER_CLIENT)
            with client.websocket_connect("/v1/dictation", **via(ATTACKER)) as fourth:
                assert receive(fourth) == {"type": "error", "code": "over_capacity", "message": PER_CLIENT,
                                           "retryable": True}
                assert close_code(fourth) == (1013, PER_CLIENT)
            with client.websocket_connect(REALTIME, **via(OTHER)) as other:
                opened(other)
                assert (streams(client, OTHER), streams(client)) == (1, 3)
            first.send_json({"type": "end"})
            assert receive(first) == {"type": "closed", "utterances": 0, "audio_s": 0.0}
            # one of its own ended: the client has room again
            wait_for(lambda: streams(client, ATTACKER) == 1, "the ended stream's slot is released")
            with client.websocket_connect("/v1/dictation", **via(ATTACKER)) as again:
                assert receive(again)["type"] == "ready"
        wait_for(lambda: streams(client) == 0, "every stream's slot is released")


def test_the_per_client_limit_is_a_setting(tmp_path):
    with behind_proxy(tmp_path, max_dictation_streams_per_client=1) as client, \
            client.websocket_connect("/v1/dictation", **via(ATTACKER)) as first:
        assert receive(first)["type"] == "ready"
        with client.websocket_connect("/v1/listen", **via(ATTACKER)) as second:
            message = ("too many dictation streams from one client (limit 1 per client); end one of yours or try "
                       "again later")
            assert close_code(second) == (1013, message)


def test_a_stream_ended_by_bad_audio_or_by_the_client_leaving_releases_its_slot(tmp_path):
    with behind_proxy(tmp_path) as client:
        for _ in range(3):  # more times than the share holds: each slot came back
            with client.websocket_connect("/v1/dictation?encoding=ogg", **via(ATTACKER)) as bad:
                receive(bad)
                bad.send_bytes(b"this is not an Ogg page" * 4)
                assert receive(bad)["code"] == "bad_audio"
                assert close_code(bad)[0] == 4400
            with client.websocket_connect("/v1/listen", **via(ATTACKER)):
                wait_for(lambda: streams(client, ATTACKER) == 1, "the stream is registered")
            # the client left without a word
            wait_for(lambda: streams(client) == 0, "the slots of the ended streams are released")
