"""The Host allow-list: DNS rebinding is refused on every route and upgrade,
whoever the client is; loopback names, the bind address, the LAN-share address
and VOXGATE_ALLOWED_HOSTS pass."""

from __future__ import annotations

import ipaddress

import pytest
from starlette.websockets import WebSocketDisconnect

from auth import AuthConfig
from auth.hosts import host_allowed, host_name, normalize_pattern
from gateway.config import ConfigError, Settings
from tests.auth.auth_harness import KEY

HOST_REJECTED = {"detail": "host not allowed: VOXGATE_ALLOWED_HOSTS lists the names this server answers to",
                 "code": "host_rejected"}
REBOUND = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
TRUSTED_NET = (ipaddress.ip_network("203.0.113.0/24"),)


def _close_of(client, url: str, headers: dict[str, str]) -> tuple[int, str]:
    with client.websocket_connect(url, headers=headers) as ws:
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    return closed.value.code, closed.value.reason


def test_a_rebound_page_cannot_read_the_pin_from_a_loopback_browser(harness) -> None:
    h = harness(AuthConfig())
    h.enable_pin()
    r = h.local.get("/v1/admin/share", headers=REBOUND)
    assert (r.status_code, r.json()) == (400, HOST_REJECTED)


@pytest.mark.parametrize("path", ["/public", "/consume", "/admin"])
def test_every_route_class_checks_the_host(harness, path: str) -> None:
    h = harness(AuthConfig())
    r = h.local.get(path, headers={"Host": "evil.example"})
    assert (r.status_code, r.json()) == (400, HOST_REJECTED)


def test_a_trusted_network_client_on_a_rebound_domain_opens_no_socket_and_mints_no_ticket(harness) -> None:
    h = harness(AuthConfig(trusted_networks=TRUSTED_NET))
    assert _close_of(h.trusted, "/v1/tts", REBOUND) == (1008, HOST_REJECTED["detail"])
    r = h.trusted.post("/v1/auth/ticket", headers=REBOUND, json={"path": "/v1/tts"})
    assert (r.status_code, r.json()) == (400, HOST_REJECTED)


def test_the_check_comes_before_credentials_and_counts_no_failure(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    for _ in range(12):
        r = h.remote.get("/consume", headers={"Host": "evil.example", "X-API-Key": "wrong"})
        assert (r.status_code, r.json()) == (400, HOST_REJECTED)
    assert h.remote.get("/consume", headers={"X-API-Key": KEY}).json()["principal"] == "api_key"


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "127.9.9.9", "localhost", "LOCALHOST:8000", "app.localhost:8000",
                                  "[::1]:8000", "localhost.", "testserver"])
def test_loopback_names_pass(harness, host: str) -> None:
    h = harness(AuthConfig())
    assert h.local.get("/admin", headers={"Host": host}).json() == {"principal": "loopback", "may_admin": True}


def test_the_share_address_passes_only_while_sharing(harness) -> None:
    h = harness(AuthConfig())
    share_host = {"Host": "192.0.2.10:8001"}  # FakeListener's LAN address
    assert h.remote.get("/public", headers=share_host).status_code == 400
    pin = h.enable_pin()
    assert h.remote.get("/consume", headers={**share_host, "X-Voxgate-Pin": pin}).json()["principal"] == "pin"
    assert h.local.request("DELETE", "/v1/admin/share").status_code == 204
    assert h.remote.get("/public", headers=share_host).status_code == 400


def test_a_wildcard_bind_answers_to_ip_literals_but_not_to_names(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY, bind_host="0.0.0.0"))
    assert h.remote.get("/consume", headers={"Host": "192.168.1.20:8000", "X-API-Key": KEY}).status_code == 200
    assert h.remote.get("/consume", headers={"Host": "[2001:db8::5]:8000", "X-API-Key": KEY}).status_code == 200
    r = h.remote.get("/consume", headers={"Host": "voxgate.example", "X-API-Key": KEY})
    assert (r.status_code, r.json()) == (400, HOST_REJECTED)


def test_configured_names_and_domains_pass(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY, allowed_hosts=("voxgate.example", ".corp.example")))
    for host in ("voxgate.example", "VOXGATE.example:443", "corp.example", "speech.corp.example"):
        assert h.remote.get("/consume", headers={"Host": host, "X-API-Key": KEY}).status_code == 200, host
    for host in ("evil.voxgate.example", "notcorp.example", "corp.example.evil"):
        assert h.remote.get("/consume", headers={"Host": host, "X-API-Key": KEY}).status_code == 400, host


def test_the_bind_address_passes() -> None:
    scope = {"headers": [(b"host", b"192.168.1.20:8000")]}
    assert host_allowed(scope, bind_host="192.168.1.20", allowed_hosts=(), share_host=None)
    assert not host_allowed(scope, bind_host="192.168.1.21", allowed_hosts=(), share_host=None)


def test_two_host_headers_are_refused_and_a_missing_one_passes() -> None:
    two = {"headers": [(b"host", b"localhost"), (b"host", b"evil.example")]}
    assert not host_allowed(two, bind_host="127.0.0.1", allowed_hosts=("*",), share_host=None)
    assert host_allowed({"headers": []}, bind_host="127.0.0.1", allowed_hosts=(), share_host=None)


@pytest.mark.parametrize(("raw", "name"), [
    ("Example.COM:8000", "example.com"), ("[::1]:8000", "::1"), ("::1", "::1"), ("host.", "host"), ("", ""),
])
def test_host_name(raw: str, name: str) -> None:
    assert host_name(raw) == name


def test_allowed_hosts_setting_is_parsed_and_checked() -> None:
    settings = Settings.from_env({"VOXGATE_ALLOWED_HOSTS": "Voxgate.Example, .corp.example, *.lan, *"})
    assert settings.allowed_hosts == ("voxgate.example", ".corp.example", ".lan", "*")
    assert settings.auth_config().allowed_hosts == settings.allowed_hosts
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"VOXGATE_ALLOWED_HOSTS": "https://voxgate.example/"})
    assert str(info.value) == ("VOXGATE_ALLOWED_HOSTS='https://voxgate.example/' has 'https://voxgate.example/', "
                               "which is not a host name (use name, .domain for subdomains, or *)")
    assert normalize_pattern("*.Example.org") == ".example.org"
