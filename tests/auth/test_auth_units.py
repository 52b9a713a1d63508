"""Pure units: client address, origins, credential order, failure buckets, the bind check."""

from __future__ import annotations

import ipaddress

import pytest

from auth import AuthConfig, refuse_unsafe_bind
from auth.client_address import resolve_client
from auth.credentials import CredentialKind, presented_credential
from auth.lockout import FailureLimiter, client_bucket
from auth.origin import normalize_origin
from auth.redact import redact_secrets
from auth.share import ShareInfo, new_pin
from auth.store_memory import MemoryStore

PROXY = (ipaddress.ip_network("10.0.0.0/8"),)


def scope(client=("198.51.100.9", 1), headers=(), query=b"", type_="http") -> dict:
    return {"type": type_, "client": client, "query_string": query,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}


@pytest.mark.parametrize(("peer", "xff", "expected"), [
    ("10.0.0.2", "203.0.113.5", "203.0.113.5"),
    ("10.0.0.2", "127.0.0.1, 203.0.113.5", "203.0.113.5"),  # the left part is the client's word
    ("10.0.0.2", "203.0.113.5, 10.0.0.9", "203.0.113.5"),  # skip proxies from the right
    ("10.0.0.2", "10.0.0.7, 10.0.0.9", "10.0.0.7"),  # all proxies: the left-most
    ("10.0.0.2", "", "unknown"),  # a trusted proxy that does not name its client: unknown, never the proxy
    ("198.51.100.9", "127.0.0.1", "198.51.100.9"),  # an untrusted peer's header is ignored
    ("10.0.0.2", "garbage", "unknown"),
    ("::ffff:10.0.0.2", "::1", "::1"),
])
def test_forwarded_for(peer: str, xff: str, expected: str) -> None:
    headers = [("x-forwarded-for", xff)] if xff else []
    assert resolve_client(scope((peer, 1), headers), PROXY).host == expected


def test_untrusted_forwarded_for_cannot_claim_loopback() -> None:
    client = resolve_client(scope(("198.51.100.9", 1), [("x-forwarded-for", "127.0.0.1")]), PROXY)
    assert client.is_loopback is False


def test_unparseable_peer_is_not_loopback() -> None:
    client = resolve_client(scope(("testclient", 1)), ())
    assert (client.host, client.is_loopback) == ("testclient", False)


def test_forwarded_proto_only_from_a_trusted_proxy() -> None:
    headers = [("x-forwarded-proto", "https")]
    assert resolve_client(scope(("10.0.0.2", 1), headers), PROXY).scheme == "https"
    assert resolve_client(scope(("198.51.100.9", 1), headers), PROXY).scheme == "http"


@pytest.mark.parametrize(("raw", "normal"), [
    ("HTTPS://Example.COM:443", "https://example.com"),
    ("http://example.com:80/", "http://example.com"),
    ("http://example.com:8080", "http://example.com:8080"),
    ("http://[::1]:80", "http://[::1]"),
    ("http://[::1]", "http://[::1]"),
    ("null", "null"),
])
def test_normalize_origin(raw: str, normal: str) -> None:
    assert normalize_origin(raw) == normal


def test_credential_order_explicit_before_cookies() -> None:
    s = scope(headers=[("cookie", "vg_session=a; vg_pin=123456"), ("x-voxgate-pin", "654321"),
                       ("x-api-key", "k")], query=b"ticket=t&api_key=q")
    assert presented_credential(s).kind is CredentialKind.API_KEY
    assert presented_credential(s).value == "k"
    s = scope(headers=[("cookie", "vg_session=a; vg_pin=123456")])
    assert (presented_credential(s).kind, presented_credential(s).from_cookie) == (CredentialKind.SESSION_COOKIE, True)


def test_unsupported_authorization_scheme_is_a_presented_credential() -> None:
    cred = presented_credential(scope(headers=[("authorization", "Basic dTpw")]))
    assert cred.kind is CredentialKind.UNSUPPORTED


def test_empty_values_count_as_absent() -> None:
    assert presented_credential(scope(headers=[("x-api-key", "  ")], query=b"api_key=")) is None


def test_ipv6_failures_are_counted_per_64() -> None:
    assert client_bucket("2001:db8:1:2:aaaa::1") == client_bucket("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert client_bucket("203.0.113.5") == "203.0.113.5"


async def test_failure_table_is_bounded() -> None:
    now = [0.0]
    store = MemoryStore(clock=lambda: now[0], max_failure_keys=3)
    limiter = FailureLimiter(store, limit=2, window_s=60)
    for i in range(10):
        await limiter.record_failure(f"10.0.0.{i}")
    assert len(store._failures) == 3
    assert [await limiter.retry_after_s(f"10.0.0.{i}") for i in (0, 9)] == [None, None]
    await limiter.record_failure("10.0.0.9")
    assert await limiter.retry_after_s("10.0.0.9") == 60


def test_pins_are_six_digits() -> None:
    pins = {new_pin() for _ in range(200)}
    assert all(len(p) == 6 and p.isdigit() for p in pins) and len(pins) > 150


def test_share_url_brackets_ipv6() -> None:
    assert ShareInfo("123456", "fe80::1", 8001).url == "http://[fe80::1]:8001/?pin=123456"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_bind_is_always_safe(host: str) -> None:
    assert refuse_unsafe_bind(AuthConfig(), host) is None


@pytest.mark.parametrize("config", [
    AuthConfig(api_key="vgk-bind-test-Lp3qW8zR5tN2"),
    AuthConfig(trusted_networks=(ipaddress.ip_network("192.168.1.0/24"),)),
    AuthConfig(allow_anonymous=True),
])
def test_protected_non_loopback_bind_is_safe(config: AuthConfig) -> None:
    assert refuse_unsafe_bind(config, "0.0.0.0") is None


def test_unprotected_non_loopback_bind_names_the_options() -> None:
    message = refuse_unsafe_bind(AuthConfig(server_mode=True), "0.0.0.0")
    assert message is not None
    assert message.startswith("0.0.0.0 is not a loopback address, and listening there needs a credential. Choose one of:\n")
    for option in ("VOXGATE_API_KEY", "PIN", "POST /v1/admin/share", "VOXGATE_TRUSTED_NETWORKS", "--allow-anonymous"):
        assert option in message


def test_config_rejects_an_empty_key_and_a_bad_origin() -> None:
    with pytest.raises(ValueError, match="api_key is empty"):
        AuthConfig(api_key=" ")
    with pytest.raises(ValueError, match="allowed_origins has 'https://x.example/path'"):
        AuthConfig(allowed_origins=("https://x.example/path",))


def test_key_is_not_in_the_config_repr() -> None:
    assert "s3cret" not in repr(AuthConfig(api_key="s3cret-in-the-config-Hk4mV9"))


def test_access_log_filter_masks_query_secrets(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from auth.redact import SecretFilter

    logger = logging.getLogger("test.access")
    logger.addFilter(SecretFilter())
    try:
        with caplog.at_level(logging.INFO, logger="test.access"):
            logger.info('%s - "%s %s"', "203.0.113.5:1", "GET", "/v1/tts?voice=a&api_key=s3cret&ticket=vgt_x&pin=123456")
    finally:
        logger.filters.clear()
    assert caplog.messages == ['203.0.113.5:1 - "GET /v1/tts?voice=a&api_key=***&ticket=***&pin=***"']


@pytest.mark.parametrize(("origin", "loopback"), [
    ("http://localhost:8000", True), ("http://127.0.0.1", True), ("http://127.9.9.9:1", True),
    ("http://[::1]:8000", True), ("http://app.localhost", True),
    ("http://evil.example:8000", False), ("http://192.168.1.20:8001", False), ("null", False),
])
def test_loopback_origins(origin: str, loopback: bool) -> None:
    from auth.origin import is_loopback_origin

    assert is_loopback_origin(origin) is loopback


@pytest.mark.parametrize("line", [
    '127.0.0.1:5000 - "WebSocket /v1/tts?api%5Fkey=SECRET-1" [accepted]',
    'GET /v1/engines?x=1&%61pi_key=SECRET-1 HTTP/1.1',
    'GET /v1/engines?API%5FKEY=SECRET-1&ticket%3D=x HTTP/1.1',
    'GET /v1/tts?tick%65t=SECRET-1',
    'GET /v1/tts?x=%26api_key%3D&Api_Key=SECRET-1',
    '127.0.0.1:5000 - "WebSocket /v1/dictation?resume=SECRET-1&last_seq=4" [accepted]',  # a resume token
])
def test_percent_encoded_secret_names_are_redacted(line: str) -> None:
    assert "SECRET-1" not in redact_secrets(line)
    assert redact_secrets(line).count("***") >= 1
