"""The admin side of the browser client in a real headless Chromium: the QR
encoder (checked with a real decoder, zxing-cpp), the LAN-share switch, the
live sessions list and the add-a-voice form, with the gateway's answers played
by Playwright. tests/e2e/test_browser.py shares a real gateway and decodes its
QR code too.
"""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
import zxingcpp

from tests.e2e.browser_support import (
    ENGINES_READY,
    ME_ADMIN,
    PHONE,
    VOICES,
    answer,
    decode_qr,
    expect,
    open_app,
    refusal,
)
from tests.e2e.gateway_process import running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SHARE = {"pin": "482913", "url": "https://192.168.1.20:8001/?pin=482913", "port": 8001,
         "fingerprint": "3F:9A:5C:0E:71:D2:48:B6:1A:E4:07:93:C8:2D:6F:B1:55:0A:E9:3C:74:12:8F:D6:A0:4B:E7:19:62:C3:8D:C1"}


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "none") as gw:
        yield gw.url


# ---- the QR encoder


@pytest.mark.parametrize(("text", "version"), [
    ("a", 1),
    ("http://192.168.1.20:8001/?pin=482913", 3),
    ("http://[fd12:3456:789a:1::2]:8001/?pin=482913", 4),
    ("x" * 100, 6),
    ("y" * 150, 8),  # versions 7 and up carry version information blocks
    ("z" * 213, 10),
    ("Grüße, 你好 ✓", 2),  # 19 bytes of UTF-8
])
def test_the_qr_encoder_is_read_by_a_real_decoder(page, gateway_url, text, version):
    page.goto(gateway_url + "/static/index.html")
    rows = page.evaluate("(text) => import('/static/js/qr.js').then((qr) => qr.encodeQr(text))", text)
    assert len(rows) == 17 + 4 * version
    modules = np.pad(np.array(rows, dtype=np.uint8), 4)  # the quiet zone
    image = (255 - 255 * np.kron(modules, np.ones((5, 5), dtype=np.uint8))).astype(np.uint8)
    [result] = zxingcpp.read_barcodes(image, formats=zxingcpp.BarcodeFormat.QRCode)
    assert (result.text, result.ec_level) == (text, "M")


def test_the_qr_encoder_refuses_what_does_not_fit(page, gateway_url):
    page.goto(gateway_url + "/static/index.html")
    error = page.evaluate("import('/static/js/qr.js').then((qr) => { try { qr.encodeQr('w'.repeat(214)); }"
                          " catch (err) { return err.message; } })")
    assert error == "too long for a QR code of version 10: 214 bytes"


# ---- LAN sharing


def test_sharing_switch_starts_and_ends_sharing_and_shows_a_scannable_link(page, gateway_url, screenshots):
    calls: list[str] = []

    def share(route):
        calls.append(route.request.method)
        if route.request.method == "GET":
            answer(200, {"enabled": False, "url": None, "port": None, "fingerprint": None})(route)
        elif route.request.method == "POST":
            answer(201, SHARE)(route)
        else:
            answer(204, None)(route)

    page.route("**/v1/admin/share", share)
    open_app(page, gateway_url, me=ME_ADMIN)
    switch = page.get_by_role("switch", name="Share this gateway on the local network")
    expect(switch).not_to_be_checked()
    expect(page.locator("#share-details")).to_be_hidden()
    switch.check()
    expect(page.locator("#share-pin")).to_have_text("482913")
    expect(page.get_by_role("link", name=SHARE["url"])).to_have_attribute("href", SHARE["url"])
    expect(page.locator("#share-fingerprint")).to_have_text(SHARE["fingerprint"])
    qr = page.get_by_role("img", name="QR code of the share link")
    assert decode_qr(qr.screenshot()) == [SHARE["url"]]
    screenshots.take(page, "admin-sharing")
    switch.uncheck()
    expect(page.locator("#share-status")).to_have_text("Sharing off. The PIN no longer works.")
    expect(page.locator("#share-details")).to_be_hidden()
    assert calls == ["GET", "POST", "DELETE"]


def test_sharing_that_cannot_start_says_why(page, gateway_url):
    page.route("**/v1/admin/share", lambda route: answer(200, {"enabled": False})(route) if route.request.method == "GET"
               else answer(503, refusal("LAN sharing could not start its listener: Address already in use",
                                        "share_unavailable"))(route))
    open_app(page, gateway_url, me=ME_ADMIN)
    switch = page.get_by_role("switch", name="Share this gateway on the local network")
    switch.click()  # not check(): the page may put the switch back before check() looks
    expect(page.locator("#share-status")).to_have_text(
        "LAN sharing could not be started: LAN sharing could not start its listener: Address already in use.")
    expect(switch).not_to_be_checked()


# ---- live sessions


def test_live_sessions_are_listed(page, gateway_url):
    sessions = {"sessions": [
        {"id": "dic-1-abc", "kind": "dictation", "client": "127.0.0.1:5100", "age_s": 12.4, "phase": "streaming",
         "sample_rate": 48000, "language": "auto", "audio_s": 11.9, "utterances": 2, "lag_s": 0.42},
        {"id": "tts-2-def", "kind": "tts", "client": "192.168.1.7:6000", "age_s": 3.0, "engine": "pocket",
         "voice": "alba", "state": "speaking", "sample_rate": 24000, "utterances": 1, "pending_utterances": 0,
         "frames_sent": 37, "audio_s_sent": 2.96, "queued_audio_s": 1.2, "send_blocked_s": 0.0},
    ]}
    page.route("**/v1/admin/sessions", answer(200, sessions))
    open_app(page, gateway_url, me=ME_ADMIN)
    rows = page.locator("#sessions-body tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td")).to_have_text(
        ["dictation", "127.0.0.1:5100", "12 s", "11.9 s of audio, 2 utterance(s)", "0.4 s"])
    expect(rows.nth(1).locator("td")).to_have_text(
        ["tts", "192.168.1.7:6000", "3 s", "pocket/alba, 37 frames, 1 utterance(s)", "1.2 s queued"])
    expect(page.locator("#sessions-status")).to_have_text("2 live session(s).")


def test_live_sessions_fit_a_phone_without_sideways_scrolling(page, gateway_url, screenshots):
    sessions = {"sessions": [
        {"id": "dic-1-abc", "kind": "dictation", "client": "2001:db8:1234:5678:9abc:def0:1234:5678", "age_s": 812.4,
         "audio_s": 811.9, "utterances": 124, "lag_s": 0.42},
        {"id": "tts-2-def", "kind": "tts", "client": "192.168.100.170:61234", "age_s": 3.0, "engine": "omnivoice",
         "voice": "a-long-cloned-voice-name", "frames_sent": 123456, "utterances": 1000, "queued_audio_s": 12.2},
    ]}
    page.route("**/v1/admin/sessions", answer(200, sessions))
    page.set_viewport_size(PHONE)
    open_app(page, gateway_url, me=ME_ADMIN)
    expect(page.locator("#sessions-body tr")).to_have_count(2)
    wrap = page.locator(".table-wrap")
    assert wrap.evaluate("(el) => [el.scrollWidth, el.clientWidth]") == [wrap.evaluate("(el) => el.clientWidth")] * 2
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.locator("#sessions-title").scroll_into_view_if_needed()
    screenshots.take(page, "admin-sessions")


# ---- adding a voice


def wav_bytes(seconds: float = 2.0, rate: int = 24000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.zeros(int(seconds * rate), dtype="<i2").tobytes())
    return out.getvalue()


def test_add_a_voice_uploads_the_wav_and_selects_the_new_voice(page, gateway_url, screenshots):
    uploads: list[bytes] = []
    voices = {"voices": [*VOICES["voices"]], "defaults": VOICES["defaults"]}

    def add_voice(route):
        if route.request.method != "POST":
            answer(200, voices)(route)
            return
        uploads.append(route.request.post_data_buffer)
        new = {"id": "my-voice", "engine": "pocket", "name": "my-voice", "language": "en", "source": "cloned"}
        voices["voices"].append(new)
        answer(201, {"voice": new})(route)

    open_app(page, gateway_url, me=ME_ADMIN)
    page.route("**/v1/voices", add_voice)
    page.get_by_text("Add a voice").click()
    page.get_by_label("Name of the new voice").fill("my-voice")
    page.get_by_label("Voice sample (a WAV file, 1 to 30 seconds of one speaker)").set_input_files(
        {"name": "sample.wav", "mimeType": "audio/wav", "buffer": wav_bytes()})
    screenshots.take(page, "speech-add-a-voice")
    page.get_by_role("button", name="Clone voice").click()
    expect(page.locator("#clone-status")).to_have_text("Voice my-voice added.")
    expect(page.get_by_label("Voice", exact=True)).to_have_value("my-voice")
    [body] = uploads
    assert b'name="id"\r\n\r\nmy-voice\r\n' in body
    assert b'name="engine"\r\n\r\npocket\r\n' in body
    assert b'name="file"; filename="sample.wav"\r\nContent-Type: audio/wav\r\n\r\n' + wav_bytes() in body


def test_add_a_voice_reports_the_gateways_refusal_by_code(page, gateway_url):
    open_app(page, gateway_url, me=ME_ADMIN)
    page.route("**/v1/voices", lambda route: answer(409, refusal(
        "id: voice 'alba' already exists; delete it first or choose another id", "voice_exists"))(route)
        if route.request.method == "POST" else answer(200, VOICES)(route))
    page.get_by_text("Add a voice").click()
    page.get_by_label("Name of the new voice").fill("alba")
    page.get_by_label("Voice sample (a WAV file, 1 to 30 seconds of one speaker)").set_input_files(
        {"name": "sample.wav", "mimeType": "audio/wav", "buffer": wav_bytes()})
    page.get_by_role("button", name="Clone voice").click()
    expect(page.locator("#clone-status")).to_have_text(
        "A voice of that name exists already: id: voice 'alba' already exists; delete it first or choose another id.")


def test_add_a_voice_is_offered_only_where_the_engine_can_clone(page, gateway_url):
    engines = {"engines": [{**ENGINES_READY["engines"][0], "can_clone": False}, ENGINES_READY["engines"][1]]}
    open_app(page, gateway_url, engines, me=ME_ADMIN)
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    expect(page.get_by_text("Add a voice")).to_be_hidden()
