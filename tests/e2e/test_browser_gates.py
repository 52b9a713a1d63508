"""The browser client's sign-in gates, who-am-I driven controls, engine notes and
accessibility, in a real headless Chromium.

The page is served by a real `voxgate serve` (no engines). The gateway sees this
browser as loopback, which may do everything, so the gate answers (401
`pin_required`, 403 `loopback_required`, ...) are played by Playwright's request
routing: these tests pin down what the page does with each answer of the
contract in docs/auth.md. tests/e2e/test_browser.py runs the same page against
a real gateway in each mode.
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.browser_support import (
    ENGINES_READY,
    ME_ADMIN,
    ME_USER,
    PHONE,
    VOICES,
    answer,
    expect,
    open_app,
    refusal,
)
from tests.e2e.gateway_process import running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PIN_REQUIRED = refusal("PIN required", "pin_required")
KEY_REQUIRED = refusal("API key required", "api_key_required")
LOOPBACK_REQUIRED = refusal("loopback origin required", "loopback_required")
ADMIN_REQUIRED = refusal("loopback origin or admin API key required", "admin_required")
ORIGIN_REJECTED = refusal("browser origin rejected", "origin_rejected")
TOO_MANY = refusal("Too many authentication attempts", "too_many_attempts")


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "none") as gw:
        yield gw.url


def signed_in_after_post(page, refused: dict, me: dict = ME_USER) -> list[dict]:
    """/v1/engines refuses until POST /v1/auth/session succeeds; returns what was posted."""
    posted: list[dict] = []

    def engines(route):
        answer(200, ENGINES_READY)(route) if posted else answer(401, refused)(route)

    def session(route):
        posted.append({"method": route.request.method, "authorization": route.request.headers.get("authorization"),
                       "body": route.request.post_data_json})
        route.fulfill(status=204)

    page.route("**/v1/engines", engines)
    page.route("**/v1/voices", answer(200, VOICES))
    page.route("**/v1/auth/me", answer(200, me))
    page.route("**/v1/auth/session", session)
    return posted


# ---- the gates, switched on machine codes


def test_pin_link_signs_in_with_the_pin_and_clears_it_from_the_address(page, gateway_url):
    posted = signed_in_after_post(page, PIN_REQUIRED)
    page.goto(gateway_url + "/?pin=482913")
    expect(page.locator("#app")).to_be_visible()
    assert posted == [{"method": "POST", "authorization": None, "body": {"pin": "482913", "transport": "cookie"}}]
    assert page.url == gateway_url + "/"
    expect(page.locator("#gate")).to_be_hidden()


def test_pin_form_shows_when_no_pin_is_given_and_reports_a_rejected_pin(page, gateway_url, screenshots):
    posted: list[dict] = []

    def session(route):
        posted.append(route.request.post_data_json)
        answer(401, PIN_REQUIRED)(route)

    page.route("**/v1/engines", answer(401, PIN_REQUIRED))
    page.route("**/v1/auth/session", session)
    page.goto(gateway_url + "/")
    expect(page.get_by_label("PIN shown by the gateway's owner")).to_be_visible()
    expect(page.get_by_label("PIN shown by the gateway's owner")).to_be_focused()
    expect(page.locator("#key-form")).to_be_hidden()
    expect(page.locator("#app")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    screenshots.take(page, "gate-pin")
    page.get_by_label("PIN shown by the gateway's owner").fill("111111")
    page.keyboard.press("Enter")
    expect(page.locator("#pin-error")).to_have_text("That PIN was not accepted.")
    assert posted == [{"pin": "111111", "transport": "cookie"}]


def test_api_key_form_exchanges_the_key_for_a_cookie_session(page, gateway_url):
    posted = signed_in_after_post(page, KEY_REQUIRED)
    page.goto(gateway_url + "/")
    expect(page.locator("#pin-form")).to_be_hidden()
    key_input = page.get_by_label("API key")
    expect(key_input).to_be_visible()
    key_input.fill("vg-key-of-the-test")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#app")).to_be_visible()
    assert posted == [{"method": "POST", "authorization": "Bearer vg-key-of-the-test", "body": {"transport": "cookie"}}]
    assert key_input.input_value() == ""  # the page keeps no copy of the key


@pytest.mark.parametrize(("body", "form"), [
    ({"detail": "Bitte die PIN eingeben", "code": "pin_required"}, "#pin-form"),
    ({"detail": "PIN required", "code": "api_key_required"}, "#key-form"),
])
def test_the_gate_switches_on_the_code_not_the_words(page, gateway_url, body, form):
    page.route("**/v1/engines", answer(401, body))
    page.goto(gateway_url + "/")
    expect(page.locator(form)).to_be_visible()
    expect(page.locator("#gate form:visible")).to_have_count(1)


def test_admin_gate_offers_the_key_form(page, gateway_url):
    page.route("**/v1/engines", answer(403, ADMIN_REQUIRED))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_have_text("This needs the gateway's admin API key.")
    expect(page.get_by_label("API key")).to_be_visible()


def test_loopback_only_gateway_offers_no_login(page, gateway_url, screenshots):
    page.route("**/v1/engines", answer(403, LOOPBACK_REQUIRED))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_contain_text("only serves its own machine")
    expect(page.locator("#gate input:visible")).to_have_count(0)
    expect(page.locator("#gate button:visible")).to_have_count(0)
    expect(page.locator("#app")).to_be_hidden()
    screenshots.take(page, "gate-loopback-only")


def test_foreign_origin_refusal_is_explained_without_a_login(page, gateway_url):
    page.route("**/v1/engines", answer(403, ORIGIN_REJECTED))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_contain_text("VOXGATE_ALLOWED_ORIGINS")
    expect(page.locator("#gate input:visible")).to_have_count(0)


def test_lockout_shows_the_retry_after_wait(page, gateway_url):
    page.route("**/v1/engines", answer(429, TOO_MANY, {"Retry-After": "42"}))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_have_text(re.compile(r"^Too many sign-in attempts\. Try again in 4[0-2] s\.$"))
    expect(page.locator("#gate input:visible")).to_have_count(0)


def test_a_wrong_pin_after_sharing_ended_says_so(page, gateway_url):
    page.route("**/v1/engines", answer(401, PIN_REQUIRED))
    page.route("**/v1/auth/session", answer(403, LOOPBACK_REQUIRED))
    page.goto(gateway_url + "/")
    page.get_by_label("PIN shown by the gateway's owner").fill("123456")
    page.get_by_role("button", name="Enter").click()
    expect(page.locator("#pin-error")).to_have_text(
        "This gateway no longer accepts a PIN from here (LAN sharing may have been turned off).")


# ---- who am I: sign-out and admin controls


def test_sign_out_is_offered_only_where_a_session_exists(page, gateway_url):
    open_app(page, gateway_url, me={"principal": "loopback", "admin": True, "session": False})
    expect(page.locator("#who")).to_have_text("This computer · admin")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()


def test_sign_out_deletes_the_session_and_asks_again(page, gateway_url):
    calls: list[str] = []

    def session(route):
        calls.append(route.request.method)
        route.fulfill(status=204)

    open_app(page, gateway_url, me=ME_USER)
    expect(page.locator("#who")).to_have_text("Signed in with the PIN")
    page.unroute("**/v1/engines")
    page.route("**/v1/engines", answer(401, KEY_REQUIRED))
    page.route("**/v1/auth/session", session)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    assert calls == ["DELETE"]


def test_admin_controls_are_hidden_from_other_principals(page, gateway_url):
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url) if "/v1/admin/" in r.url else None)
    open_app(page, gateway_url, me=ME_USER)
    expect(page.locator("#tts-voice")).to_have_value("marius")
    expect(page.locator("#admin")).to_be_hidden()
    expect(page.get_by_text("Add a voice")).to_be_hidden()
    assert requested == []  # a non-admin page never asks the admin routes


def test_admin_controls_are_shown_to_admins(page, gateway_url):
    open_app(page, gateway_url, me=ME_ADMIN)
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    expect(page.get_by_role("switch", name="Share this gateway on the local network")).not_to_be_checked()
    expect(page.get_by_text("Add a voice")).to_be_visible()


# ---- engine states


def test_missing_engines_show_an_admin_their_detail_and_hint_and_disable_the_panels(page, gateway_url):
    engines = {"engines": [
        {"kind": "tts", "id": "pocket", "default": True, "state": "missing",
         "detail": "no model.safetensors in /data/models/pocket", "hint": "voxgate fetch pocket"},
        {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "failed", "detail": "the sidecar exited 1"},
    ]}
    open_app(page, gateway_url, engines, me=ME_ADMIN)
    expect(page.locator("#tts-note")).to_have_text(
        "The pocket engine is unavailable (missing). Why, and how to fix it"
        "no model.safetensors in /data/models/pocket. voxgate fetch pocket")
    expect(page.locator("#tts-note code")).to_be_hidden()  # folded: the note is one short line
    page.locator("#tts-note summary").click()
    expect(page.locator("#tts-note code")).to_have_text("voxgate fetch pocket")
    expect(page.locator("#asr-note")).to_have_text(
        "Speech recognition is unavailable (failed). Why, and how to fix itthe sidecar exited 1.")
    expect(page.get_by_role("button", name="Start dictation")).to_be_disabled()
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_disabled()
    expect(page.get_by_label("Engine")).to_be_disabled()
    expect(page.locator("#tts-engine option")).to_have_text(["pocket (missing)"])


def test_missing_engines_tell_a_non_admin_only_that_they_are_unavailable(page, gateway_url):
    # what GET /v1/engines sends a non-admin: the state, no detail or hint (no path, no command)
    engines = {"engines": [{"kind": "tts", "id": "pocket", "default": True, "state": "missing"},
                           {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "failed"}]}
    open_app(page, gateway_url, engines, me=ME_USER)
    expect(page.locator("#tts-note")).to_have_text("Speech is unavailable on this gateway.")
    expect(page.locator("#asr-note")).to_have_text("Dictation is unavailable on this gateway.")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_disabled()


def test_a_long_admin_engine_note_wraps_on_a_phone(page, gateway_url, screenshots):
    path = "/home/someone/.local/share/voxgate/models/pocket/model.safetensors"
    engines = {"engines": [
        {"kind": "tts", "id": "pocket", "default": True, "state": "missing",
         "detail": f"Pocket TTS weights not found: {path}",
         "hint": "run `voxgate models pull pocket` to download it, or `voxgate models make-random pocket DIR` "
                 "for random weights (then set VOXGATE_POCKET_DIR=DIR)"},
        {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "ready", "languages": ["en"]},
    ]}
    page.set_viewport_size(PHONE)
    open_app(page, gateway_url, engines, me=ME_ADMIN)
    page.locator("#tts-note summary").click()
    expect(page.locator("#tts-note code")).to_be_visible()
    expect(page.locator("#tts-note")).to_contain_text(path)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshots.take(page, "engine-note-admin")


def test_a_gateway_without_engines_says_how_to_enable_them(page, gateway_url):
    page.goto(gateway_url + "/")  # the real gateway, started with --engines none
    expect(page.locator("#asr-note")).to_contain_text("--engines asr")
    expect(page.locator("#tts-note")).to_contain_text("--engines pocket")
    expect(page.get_by_role("button", name="Start dictation")).to_be_disabled()


# ---- accessibility

UNLABELLED_CONTROLS = """
() => [...document.querySelectorAll("button, input, select, textarea, meter, summary, a[href]")]
  .filter((el) => el.getClientRects().length > 0 && el.type !== "hidden")
  .filter((el) => !((el.labels && el.labels.length) || el.getAttribute("aria-label")
                    || el.getAttribute("aria-labelledby") || el.textContent.trim()))
  .map((el) => el.outerHTML)
"""


def test_every_visible_control_has_a_name(page, gateway_url):
    open_app(page, gateway_url, me=ME_ADMIN)
    page.get_by_label("Push-to-talk").check()
    page.get_by_text("Add a voice").click()
    assert page.evaluate(UNLABELLED_CONTROLS) == []


def test_keyboard_reaches_the_controls_in_order_with_a_visible_focus(page, gateway_url):
    open_app(page, gateway_url, me=ME_USER)
    page.locator("h1").click()  # the document has the focus, nothing in it does
    reached = []
    for _ in range(8):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.id || document.activeElement.name"))
        outline = page.evaluate("(() => { const s = getComputedStyle(document.activeElement);"
                                " return [s.outlineStyle, s.outlineWidth]; })()")
        assert outline == ["solid", "3px"], f"{reached} {outline}"
    # disabled controls (Stop; Copy, the format, Download and Clear of an empty transcript) are skipped
    assert reached == ["sign-out", "dictation-mode", "mic-device", "dictation-toggle", "tts-text", "tts-engine",
                       "tts-voice", "tts-speak"]


def test_phone_width_has_no_sideways_scrolling(page, gateway_url):
    page.set_viewport_size(PHONE)
    open_app(page, gateway_url, me=ME_ADMIN)
    page.route("**/v1/admin/share", answer(200, {"enabled": True, "pin": "482913", "port": 8001,
                                                 "url": "http://192.168.1.20:8001/?pin=482913"}))
    page.reload()
    expect(page.locator("#share-qr svg")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    width = page.get_by_role("button", name="Start dictation").bounding_box()["width"]
    assert width > PHONE["width"] * 0.8  # full-width touch targets on a phone


@pytest.mark.parametrize(("scheme", "background"), [("light", "rgb(246, 247, 249)"), ("dark", "rgb(21, 24, 28)")])
def test_colours_follow_the_system_scheme(page, gateway_url, screenshots, scheme, background):
    page.emulate_media(color_scheme=scheme)
    open_app(page, gateway_url)
    assert page.evaluate("getComputedStyle(document.documentElement).backgroundColor") == background
    screenshots.take(page, f"colours-{scheme}")


# ---- the one table of WebSocket refusal reasons


def test_the_pages_refusal_table_maps_every_detail_the_gateway_closes_with(page, gateway_url):
    from auth.policy import DETAIL_CODES

    page.goto(gateway_url + "/static/index.html")
    mapped = page.evaluate("(details) => import('/static/js/close-codes.js').then((m) =>"
                           " Object.fromEntries(details.map((d) => [d, m.refusalCode(1008, d)])))", list(DETAIL_CODES))
    assert mapped == DETAIL_CODES
    signs_in = page.evaluate("(details) => import('/static/js/close-codes.js').then((m) =>"
                             " details.filter((d) => m.needsSignIn(1008, d)))", list(DETAIL_CODES))
    assert signs_in == ["PIN required", "API key required"]
