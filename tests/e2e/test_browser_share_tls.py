"""LAN sharing in a real headless Chromium against a real `voxgate serve`: the
admin panel's link and QR code are https and show the fingerprint of the
certificate the share listener really serves, and the link opens the page in a
secure context (where a browser grants the microphone). Chromium is told to
accept the self-signed certificate, as a phone's user does once by hand.
"""

from __future__ import annotations

import re

import pytest

from gateway.share_tls import fingerprint_sha256
from tests.e2e.browser_support import DESKTOP, PHONE, UI_TIMEOUT_MS, decode_qr, expect, no_page_errors, open_app
from tests.e2e.gateway_process import running_gateway
from tests.support.net import free_port
from tests.support.tls import needs_openssl, served_fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_the_share_link_is_https_with_the_served_fingerprint_and_opens_a_secure_page(
        browser, tmp_path, screenshots) -> None:
    needs_openssl()
    share_port = free_port()
    env = {"VOXGATE_SHARE_HOST": "127.0.0.1", "VOXGATE_SHARE_PORT": str(share_port)}
    with running_gateway(tmp_path, "none", env=env) as gw:
        context = browser.new_context(viewport=DESKTOP, ignore_https_errors=True)
        context.set_default_timeout(UI_TIMEOUT_MS)
        try:
            page = context.new_page()
            errors = no_page_errors(page)
            open_app(page, gw.url, me=None)  # the real gateway judges: loopback is admin
            page.get_by_role("switch", name="Share this gateway on the local network").check()
            link = page.locator("#share-link")
            expect(link).to_have_text(re.compile(rf"^https://127\.0\.0\.1:{share_port}/\?pin=[0-9]{{6}}$"))
            url = link.inner_text()
            fingerprint = fingerprint_sha256(tmp_path / "share-tls" / "cert.pem")
            assert fingerprint == served_fingerprint("127.0.0.1", share_port)
            expect(page.locator("#share-fingerprint")).to_have_text(fingerprint)
            expect(page.locator("#share-tls")).to_be_visible()
            assert decode_qr(page.get_by_role("img", name="QR code of the share link").screenshot()) == [url]
            screenshots.take(page, "admin-sharing-https")

            phone = context.new_page()
            phone.set_viewport_size(PHONE)
            phone_errors = no_page_errors(phone)
            phone.goto(url)
            expect(phone.locator("#app")).to_be_visible()
            assert phone.evaluate("window.isSecureContext && typeof navigator.mediaDevices?.getUserMedia") \
                == "function"
            assert (errors, phone_errors) == ([], [])
        finally:
            context.close()
