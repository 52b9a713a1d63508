"""The admin's live-sessions list names each session's client by the address the
auth layer resolved: X-Forwarded-For counts only from a trusted proxy."""

from __future__ import annotations

import ipaddress

import pytest
from starlette.requests import HTTPConnection

from auth.principal import SCOPE_KEY, Principal, PrincipalKind
from gateway.registry import client_label
from tests.gateway.helpers import tts_client

KEY = "k" * 32


def listed_client(client, headers: dict[str, str], admin_headers: dict[str, str]) -> str:
    with client.websocket_connect("/v1/tts", headers=headers) as ws:
        assert ws.receive_json()["type"] == "ready"
        (session,) = client.get("/v1/admin/sessions", headers=admin_headers).json()["sessions"]
        return str(session["client"])


def test_a_session_behind_a_trusted_proxy_is_listed_under_its_client(tmp_path) -> None:
    with tts_client(tmp_path, server_mode=True, api_key=KEY,
                    forwarded_allow_ips=(ipaddress.ip_network("127.0.0.1/32"),)) as client:
        # the proxy (127.0.0.1:5000) relays 203.0.113.9, who wrote 198.51.100.1 in front (unproven)
        auth = {"Authorization": f"Bearer {KEY}"}
        proxied = {**auth, "X-Forwarded-For": "198.51.100.1, 203.0.113.9"}
        assert listed_client(client, proxied, auth) == "203.0.113.9"


def test_forwarded_for_from_an_untrusted_peer_is_not_believed(tmp_path) -> None:
    with tts_client(tmp_path, server_mode=True, api_key=KEY) as client:
        auth = {"Authorization": f"Bearer {KEY}"}
        assert listed_client(client, {**auth, "X-Forwarded-For": "203.0.113.9"}, auth) == "127.0.0.1:5000"


@pytest.mark.parametrize(("resolved", "label"), [
    ("127.0.0.1", "127.0.0.1:5000"),  # the peer itself: its port says which connection
    ("203.0.113.9", "203.0.113.9"),  # a proxy's client: the port would be the proxy's
    ("unknown", "unknown"),  # a trusted proxy that did not say who its client is
])
def test_the_label_is_the_resolved_address(resolved, label) -> None:
    scope = {"type": "websocket", "client": ("127.0.0.1", 5000), "headers": [],
             SCOPE_KEY: Principal(PrincipalKind.ANONYMOUS, resolved)}
    assert client_label(HTTPConnection(scope)) == label
