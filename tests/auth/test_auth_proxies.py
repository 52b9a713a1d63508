"""Proxy set-ups fail closed: a trusted proxy that does not name its client, and
a local proxy nobody declared, never make a remote client loopback."""

from __future__ import annotations

import ipaddress
import logging

import pytest

from auth import AuthConfig
from auth.bind import proxy_warning
from tests.auth.auth_harness import KEY

LOCAL_PROXY = (ipaddress.ip_network("127.0.0.1/32"),)
ADMIN_GATE = {"detail": "loopback origin or admin API key required", "code": "admin_required"}
KEY_REQUIRED = {"detail": "API key required", "code": "api_key_required"}
LOOPBACK_REQUIRED = {"detail": "loopback origin required", "code": "loopback_required"}
WARNING = ("auth: a loopback client sent X-Forwarded-For/Forwarded headers, but no proxy is trusted: treating it as "
           "a remote client. A reverse proxy on this host must be named in VOXGATE_FORWARDED_ALLOW_IPS (and run the "
           "gateway in server mode with an API key)")


def test_a_trusted_proxy_without_x_forwarded_for_is_not_loopback(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY, forwarded_allow_ips=LOCAL_PROXY))
    r = h.local.get("/admin")
    assert (r.status_code, r.json()) == (403, ADMIN_GATE)
    r = h.local.get("/consume")
    assert (r.status_code, r.json()) == (401, KEY_REQUIRED)
    # The key still works through the proxy, and a local client the proxy names is loopback.
    assert h.local.get("/admin", headers={"X-API-Key": KEY}).json() == {"principal": "api_key", "may_admin": True}
    assert h.local.get("/admin", headers={"X-Forwarded-For": "127.0.0.1"}).json()["principal"] == "loopback"


@pytest.mark.parametrize("header", [("X-Forwarded-For", "198.51.100.20"), ("Forwarded", "for=198.51.100.20"),
                                    ("X-Real-IP", "198.51.100.20")])
def test_an_undeclared_local_proxy_relays_remote_clients(harness, caplog, header) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    caplog.set_level(logging.WARNING, logger="voxgate.auth")
    r = h.local.get("/admin", headers=dict([header]))
    assert (r.status_code, r.json()) == (403, ADMIN_GATE)
    r = h.local.get("/consume", headers=dict([header]))
    assert (r.status_code, r.json()) == (401, KEY_REQUIRED)
    assert [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING] == [WARNING]


def test_an_undeclared_local_proxy_with_nothing_configured_gets_the_loopback_answer(harness) -> None:
    h = harness(AuthConfig())
    r = h.local.get("/consume", headers={"X-Forwarded-For": "198.51.100.20"})
    assert (r.status_code, r.json()) == (403, LOOPBACK_REQUIRED)
    r = h.local.get("/v1/admin/share", headers={"X-Forwarded-For": "198.51.100.20"})
    assert (r.status_code, r.json()) == (403, LOOPBACK_REQUIRED)


def test_the_warning_repeats_at_most_once_a_minute(harness, caplog) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    caplog.set_level(logging.WARNING, logger="voxgate.auth")
    forwarded = {"X-Forwarded-For": "198.51.100.20"}
    for _ in range(5):
        h.local.get("/consume", headers=forwarded)
    h.clock.advance(61)
    h.local.get("/consume", headers=forwarded)
    assert [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING] == [WARNING, WARNING]


def test_a_loopback_client_without_forwarding_headers_stays_loopback(harness) -> None:
    h = harness(AuthConfig(server_mode=True, api_key=KEY))
    assert h.local.get("/admin").json() == {"principal": "loopback", "may_admin": True}


@pytest.mark.parametrize(("config", "warned"), [
    (AuthConfig(forwarded_allow_ips=LOCAL_PROXY), True),
    (AuthConfig(server_mode=True, forwarded_allow_ips=LOCAL_PROXY), True),
    (AuthConfig(api_key=KEY, forwarded_allow_ips=LOCAL_PROXY), True),
    (AuthConfig(server_mode=True, api_key=KEY, forwarded_allow_ips=LOCAL_PROXY), False),
    (AuthConfig(), False),
])
def test_a_trusted_proxy_outside_server_mode_with_a_key_is_warned_about_at_start_up(config, warned) -> None:
    warning = proxy_warning(config)
    assert (warning is not None) == warned
    assert warning is None or warning.startswith("VOXGATE_FORWARDED_ALLOW_IPS names a proxy, but the gateway is not "
                                                 "in server mode with an API key")
