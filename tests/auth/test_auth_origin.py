"""Browser origin checks: ambient credentials need the server's own origin (or an
allowed one) on HTTP mutations and on every WebSocket upgrade."""

from __future__ import annotations

import ipaddress

import pytest
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig
from tests.auth.auth_harness import KEY

OWN = "http://testserver"  # TestClient's Host is "testserver"
FOREIGN = "https://evil.example"
ALLOWED = "https://app.example.com"
REJECTED = "browser origin rejected"


def close_of(client, url: str, headers: dict[str, str]) -> tuple[int, str]:
    with client.websocket_connect(url, headers=headers) as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    return closed.value.code, closed.value.reason


def principal_of_socket(client, url: str, headers: dict[str, str]) -> str:
    with client.websocket_connect(url, headers=headers) as ws:
        return ws.receive_json()["principal"]


@pytest.fixture
def keyed(harness):
    return harness(AuthConfig(server_mode=True, api_key=KEY, allowed_origins=(ALLOWED,)))


def test_cookie_websocket_from_a_foreign_origin_closes_1008(keyed) -> None:
    cookie = f"vg_session={keyed.key_session()}"
    assert close_of(keyed.remote, "/v1/tts", {"Cookie": cookie, "Origin": FOREIGN}) == (1008, REJECTED)


def test_cookie_websocket_from_the_servers_own_origin_is_accepted(keyed) -> None:
    cookie = f"vg_session={keyed.key_session()}"
    assert principal_of_socket(keyed.remote, "/v1/tts", {"Cookie": cookie, "Origin": OWN}) == "session"


def test_cookie_websocket_from_an_allowed_origin_is_accepted(keyed) -> None:
    cookie = f"vg_session={keyed.key_session()}"
    assert principal_of_socket(keyed.remote, "/v1/dictation", {"Cookie": cookie, "Origin": ALLOWED}) == "session"


def test_own_origin_ignores_case_and_default_port(keyed) -> None:
    cookie = f"vg_session={keyed.key_session()}"
    assert principal_of_socket(keyed.remote, "/v1/tts", {"Cookie": cookie, "Origin": "HTTP://TestServer:80"}) == "session"


def test_origin_is_checked_before_the_cookie_and_counts_no_failure(keyed) -> None:
    for _ in range(12):
        code_reason = close_of(keyed.remote, "/v1/tts", {"Cookie": "vg_session=forged", "Origin": FOREIGN})
        assert code_reason == (1008, REJECTED)
    assert keyed.remote.get("/consume", headers={"X-API-Key": KEY}).status_code == 200


def test_pin_cookie_websocket_from_a_foreign_origin_closes_1008(harness) -> None:
    h = harness(AuthConfig())
    pin = h.enable_pin()
    assert close_of(h.remote, "/v1/tts", {"Cookie": f"vg_pin={pin}", "Origin": FOREIGN}) == (1008, REJECTED)


def test_cookie_http_mutation_from_a_foreign_origin_is_403(keyed) -> None:
    cookie = f"vg_session={keyed.key_session()}"
    r = keyed.remote.post("/consume", headers={"Cookie": cookie, "Origin": FOREIGN})
    assert (r.status_code, r.json()) == (403, {"detail": REJECTED, "code": "origin_rejected"})
    r = keyed.remote.post("/consume", headers={"Cookie": cookie, "Origin": OWN})
    assert (r.status_code, r.json()["principal"]) == (200, "session")


def test_cookie_http_read_from_a_foreign_origin_is_allowed(keyed) -> None:
    # A cross-site GET cannot read the answer (no CORS) and changes nothing.
    cookie = f"vg_session={keyed.key_session()}"
    r = keyed.remote.get("/consume", headers={"Cookie": cookie, "Origin": FOREIGN})
    assert (r.status_code, r.json()["principal"]) == (200, "session")


def test_explicit_key_websocket_from_a_foreign_origin_is_accepted(keyed) -> None:
    # The page holds the key itself; nothing ambient is being borrowed.
    assert principal_of_socket(keyed.remote, f"/v1/tts?api_key={KEY}", {"Origin": FOREIGN}) == "api_key"


def test_ticket_websocket_from_a_foreign_origin_is_accepted(keyed) -> None:
    ticket = keyed.ticket("/v1/tts")
    assert principal_of_socket(keyed.remote, f"/v1/tts?ticket={ticket}", {"Origin": FOREIGN}) == "ticket"


def test_explicit_credential_wins_over_a_cookie_riding_along(keyed) -> None:
    headers = {"Cookie": "vg_session=stale", "Origin": FOREIGN}
    assert principal_of_socket(keyed.remote, f"/v1/tts?api_key={KEY}", headers) == "api_key"


def test_loopback_websocket_from_a_foreign_origin_closes_1008(keyed) -> None:
    assert close_of(keyed.local, "/v1/tts", {"Origin": FOREIGN}) == (1008, REJECTED)
    r = keyed.local.post("/admin", headers={"Origin": FOREIGN})
    assert (r.status_code, r.json()) == (403, {"detail": REJECTED, "code": "origin_rejected"})


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"])
def test_loopback_without_origin_or_from_its_own_loopback_page_is_accepted(keyed, host: str) -> None:
    assert principal_of_socket(keyed.local, "/v1/tts", {}) == "loopback"
    page = {"Host": host, "Origin": f"http://{host}"}
    assert principal_of_socket(keyed.local, "/v1/tts", page) == "loopback"
    assert keyed.local.post("/admin", headers=page).json() == {"principal": "loopback", "may_admin": True}


def test_loopback_page_on_a_rebound_domain_is_rejected_even_when_any_host_is_allowed(harness) -> None:
    # evil.example re-pointed at 127.0.0.1: its Origin equals the Host it sends. The
    # Host allow-list refuses it first (test_auth_hosts.py); with "*" allowed, the
    # origin check still does.
    h = harness(AuthConfig(server_mode=True, api_key=KEY, allowed_hosts=("*",)))
    page = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
    assert close_of(h.local, "/v1/tts", page) == (1008, REJECTED)
    r = h.local.post("/v1/admin/share", headers=page)
    assert (r.status_code, r.json()) == (403, {"detail": REJECTED, "code": "origin_rejected"})
    assert h.listener.starts == 0


def test_loopback_page_on_an_allowed_origin_is_accepted(keyed) -> None:
    assert principal_of_socket(keyed.local, "/v1/tts", {"Origin": ALLOWED}) == "loopback"


def test_trusted_network_websocket_from_a_foreign_origin_closes_1008(harness) -> None:
    h = harness(AuthConfig(server_mode=True, trusted_networks=(ipaddress.ip_network("203.0.113.0/24"),)))
    assert close_of(h.trusted, "/v1/tts", {"Origin": FOREIGN}) == (1008, REJECTED)
    assert principal_of_socket(h.trusted, "/v1/tts", {"Origin": OWN}) == "trusted_network"


def test_https_own_origin_behind_a_trusted_proxy(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY, forwarded_allow_ips=(ipaddress.ip_network("127.0.0.1/32"),)))
    cookie = f"vg_session={h.key_session()}"
    headers = {"Cookie": cookie, "Origin": "https://testserver", "X-Forwarded-For": "198.51.100.20",
               "X-Forwarded-Proto": "https"}
    assert principal_of_socket(h.local, "/v1/tts", headers) == "session"
    headers["X-Forwarded-Proto"] = "http"
    assert close_of(h.local, "/v1/tts", headers) == (1008, REJECTED)
