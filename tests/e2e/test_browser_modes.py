"""The browser client against a real gateway in each access mode.

Chromium runs on this machine, so to the gateway it is loopback, which may do
everything. To be a remote client it sends ``X-Forwarded-For`` (a documentation
address that is never contacted) to a gateway told to trust 127.0.0.1 as its
proxy: the gateway then judges it exactly as a phone on the LAN, on HTTP and on
the WebSocket upgrade alike. A trusted proxy must name every client, so the
local page and the test's own requests name 127.0.0.1. The LAN-share listener
binds 127.0.0.1 here and serves HTTPS with the certificate it makes.
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.browser_support import DESKTOP, UI_TIMEOUT_MS, decode_qr, expect, no_page_errors
from tests.e2e.gateway_process import running_gateway
from tests.support.net import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

KEY = "vgk-browser-test-Hq3mX8tR2pLw"
REMOTE = {"X-Forwarded-For": "198.51.100.9"}
LOCAL = {"X-Forwarded-For": "127.0.0.1"}  # a client on this machine, as the trusted proxy names it
PROXY_TRUST = {"VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32"}
PIN_LABEL = "PIN shown by the gateway's owner"


@pytest.fixture
def gateway(tmp_path):
    """``gateway(env)`` -> the URL of a gateway without engines, started with ``env``."""
    stack = []

    def start(env: dict[str, str]):
        cm = running_gateway(tmp_path / f"data{len(stack)}", "none", env={
            **PROXY_TRUST, "VOXGATE_SHARE_HOST": "127.0.0.1", "VOXGATE_SHARE_PORT": str(free_port()), **env})
        gw = cm.__enter__()
        stack.append(cm)
        return gw.url

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


@pytest.fixture
def open_page(browser):
    """``open_page(url, remote)`` -> a page at ``url``, as a remote client when ``remote``."""
    contexts = []

    def make(url: str, *, remote: bool):
        # ignore_https_errors: the share's self-signed certificate, accepted once as a phone's user does
        context = browser.new_context(viewport=DESKTOP, extra_http_headers=REMOTE if remote else LOCAL,
                                      ignore_https_errors=True)
        context.set_default_timeout(UI_TIMEOUT_MS)
        page = context.new_page()
        contexts.append((context, no_page_errors(page)))
        page.goto(url)
        return page

    yield make
    for context, errors in contexts:
        context.close()
        assert errors == [], f"uncaught errors in the page: {errors}"


def test_local_mode_on_the_gateways_machine_is_admin_and_shares_a_scannable_link(gateway, open_page, screenshots):
    url = gateway({})
    page = open_page(url + "/", remote=False)
    expect(page.locator("#who")).to_have_text("This computer · admin")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    switch = page.get_by_role("switch", name="Share this gateway on the local network")
    switch.check()
    expect(page.locator("#share-details")).to_be_visible()
    share = httpx.get(url + "/v1/admin/share", headers=LOCAL, timeout=10).json()
    assert share["enabled"] and share["url"] == f"https://127.0.0.1:{share['port']}/?pin={share['pin']}"
    expect(page.locator("#share-fingerprint")).to_have_text(share["fingerprint"])
    expect(page.locator("#share-pin")).to_have_text(share["pin"])
    assert decode_qr(page.get_by_role("img", name="QR code of the share link").screenshot()) == [share["url"]]
    expect(page.locator("#sessions-status")).to_have_text("No live sessions.")
    screenshots.take(page, "admin")
    switch.uncheck()
    expect(page.locator("#share-details")).to_be_hidden()
    assert httpx.get(url + "/v1/admin/share", headers=LOCAL, timeout=10).json()["enabled"] is False


def test_a_phone_opens_the_share_link_signs_in_with_the_pin_and_is_no_admin(gateway, open_page):
    url = gateway({})
    share = httpx.post(url + "/v1/admin/share", headers=LOCAL, timeout=10).json()
    page = open_page(share["url"], remote=True)
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#who")).to_have_text("Signed in with the PIN")
    expect(page.locator("#admin")).to_be_hidden()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label(PIN_LABEL)).to_be_visible()
    page.get_by_label(PIN_LABEL).fill("000000" if share["pin"] != "000000" else "111111")
    page.get_by_role("button", name="Enter").click()
    expect(page.locator("#pin-error")).to_have_text("That PIN was not accepted.")
    page.get_by_label(PIN_LABEL).fill(share["pin"])
    page.get_by_role("button", name="Enter").click()
    expect(page.locator("#app")).to_be_visible()


def test_server_mode_with_a_key_signs_in_as_admin_and_out_again(gateway, open_page):
    url = gateway({"VOXGATE_SERVER_MODE": "1", "VOXGATE_API_KEY": KEY})
    page = open_page(url + "/", remote=True)
    key = page.get_by_label("API key")
    key.fill("not-the-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#key-error")).to_have_text("That key was not accepted.")
    key.fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text("Signed in with the API key · admin")
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    expect(page.locator("#sessions-status")).to_have_text("No live sessions.")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()


def test_local_mode_with_a_key_lets_a_remote_client_in_but_not_to_admin(gateway, open_page):
    url = gateway({"VOXGATE_API_KEY": KEY})
    page = open_page(url + "/", remote=True)
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text("Signed in with the API key")
    expect(page.locator("#admin")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_a_gateway_with_nothing_configured_offers_a_remote_client_no_login(gateway, open_page):
    url = gateway({})
    page = open_page(url + "/", remote=True)
    expect(page.locator("#gate-message")).to_contain_text("only serves its own machine")
    expect(page.locator("#gate input:visible")).to_have_count(0)
