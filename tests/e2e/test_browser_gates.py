"""The browser client's logic in a real headless Chromium: the login gates, the
engine notes, the dictation and TTS sockets' event handling and close codes.

The page is served by a real `voxgate serve` (no engines). The gateway sees this
browser as loopback, which may do everything, so the gate answers
(401 `PIN required`, 403 `loopback origin required`, ...) and the sockets are
played by Playwright's request and WebSocket routing: these tests pin down what
the page does with each answer of the contract in docs/auth.md and
docs/protocol.md. tests/e2e/test_browser.py runs the same page against the
real engines.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from tests.e2e.gateway_process import running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# The test extra installs playwright and scripts/setup.sh --test installs chromium: a missing
# one is a broken setup, so it fails rather than skips.
import playwright.sync_api as playwright_api  # noqa: E402

expect = playwright_api.expect

ROOT = Path(__file__).resolve().parents[2]
UI_TIMEOUT_MS = 15000
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required",
]
ENGINES_READY = {"engines": [
    {"kind": "tts", "id": "pocket", "default": True, "state": "ready", "sample_rate": 24000, "frame_samples": 1920},
    {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "ready"},
]}
VOICES = {"voices": [{"id": "alba", "engine": "pocket", "name": "alba", "language": "en", "source": "builtin"},
                     {"id": "marius", "engine": "pocket", "name": "marius", "language": "en", "source": "builtin"}],
          "defaults": {"pocket": "marius"}}

# Records every AudioBufferSourceNode.start(when) so a test can read the play cursor.
RECORD_STARTS = """
(() => {
  window.__starts = [];
  const start = AudioBufferSourceNode.prototype.start;
  AudioBufferSourceNode.prototype.start = function (when, ...rest) {
    window.__starts.push({when, duration: this.buffer.duration, rate: this.buffer.sampleRate});
    return start.call(this, when, ...rest);
  };
})();
"""


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    assert shutil.which("chromium"), "Debian's chromium is not installed (scripts/setup.sh --test installs it)"
    with running_gateway(tmp_path_factory.mktemp("data"), "none") as gw:
        yield gw.url


@pytest.fixture(scope="module")
def browser(gateway_url):
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def answer(status: int, body: dict, headers: dict[str, str] | None = None):
    return lambda route: route.fulfill(status=status, content_type="application/json", body=json.dumps(body),
                                       headers=headers or {})


def open_app(page, gateway_url: str, engines: dict = ENGINES_READY) -> None:
    page.route("**/v1/engines", answer(200, engines))
    page.route("**/v1/voices", answer(200, VOICES))
    page.goto(gateway_url + "/")
    expect(page.locator("#app")).to_be_visible()


# ---- login gates


def test_pin_link_signs_in_with_the_pin_and_clears_it_from_the_address(page, gateway_url):
    posted: list[dict] = []
    signed_in = []

    def engines(route):
        if signed_in:
            answer(200, ENGINES_READY)(route)
        else:
            answer(401, {"detail": "PIN required"})(route)

    def session(route):
        posted.append({"method": route.request.method, "body": route.request.post_data_json})
        signed_in.append(True)
        route.fulfill(status=204)

    page.route("**/v1/engines", engines)
    page.route("**/v1/voices", answer(200, VOICES))
    page.route("**/v1/auth/session", session)
    page.goto(gateway_url + "/?pin=482913")
    expect(page.locator("#app")).to_be_visible()
    assert posted == [{"method": "POST", "body": {"pin": "482913", "transport": "cookie"}}]
    assert page.url == gateway_url + "/"
    expect(page.locator("#gate")).to_be_hidden()


def test_pin_form_shows_when_no_pin_is_given_and_reports_a_rejected_pin(page, gateway_url):
    posted: list[dict] = []

    def session(route):
        posted.append(route.request.post_data_json)
        answer(401, {"detail": "PIN required"})(route)

    page.route("**/v1/engines", answer(401, {"detail": "PIN required"}))
    page.route("**/v1/auth/session", session)
    page.goto(gateway_url + "/")
    expect(page.get_by_label("PIN shown by the gateway's owner")).to_be_visible()
    expect(page.locator("#key-form")).to_be_hidden()
    expect(page.locator("#app")).to_be_hidden()
    page.get_by_label("PIN shown by the gateway's owner").fill("111111")
    page.get_by_role("button", name="Enter").click()
    expect(page.locator("#pin-error")).to_have_text("That PIN was not accepted.")
    assert posted == [{"pin": "111111", "transport": "cookie"}]


def test_api_key_form_exchanges_the_key_for_a_cookie_session(page, gateway_url):
    requests: list[dict] = []
    signed_in = []

    def engines(route):
        if signed_in:
            answer(200, ENGINES_READY)(route)
        else:
            answer(401, {"detail": "API key required"})(route)

    def session(route):
        requests.append({"authorization": route.request.headers.get("authorization"),
                         "body": route.request.post_data_json})
        signed_in.append(True)
        route.fulfill(status=204)

    page.route("**/v1/engines", engines)
    page.route("**/v1/voices", answer(200, VOICES))
    page.route("**/v1/auth/session", session)
    page.goto(gateway_url + "/")
    expect(page.locator("#pin-form")).to_be_hidden()
    key_input = page.get_by_label("API key")
    expect(key_input).to_be_visible()
    key_input.fill("vg-key-of-the-test")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#app")).to_be_visible()
    assert requests == [{"authorization": "Bearer vg-key-of-the-test", "body": {"transport": "cookie"}}]
    assert key_input.input_value() == ""  # the page keeps no copy of the key


def test_loopback_only_gateway_offers_no_login(page, gateway_url):
    page.route("**/v1/engines", answer(403, {"detail": "loopback origin required"}))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_contain_text("only serves its own machine")
    expect(page.locator("#gate input:visible")).to_have_count(0)
    expect(page.locator("#gate button:visible")).to_have_count(0)
    expect(page.locator("#app")).to_be_hidden()


def test_foreign_origin_refusal_is_explained_without_a_login(page, gateway_url):
    page.route("**/v1/engines", answer(403, {"detail": "browser origin rejected"}))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_contain_text("VOXGATE_ALLOWED_ORIGINS")
    expect(page.locator("#gate input:visible")).to_have_count(0)


def test_lockout_shows_the_retry_after_wait(page, gateway_url):
    page.route("**/v1/engines", answer(429, {"detail": "Too many authentication attempts"}, {"Retry-After": "42"}))
    page.goto(gateway_url + "/")
    expect(page.locator("#gate-message")).to_have_text(re.compile(r"^Too many sign-in attempts\. Try again in 4[0-2] s\.$"))
    expect(page.locator("#gate input:visible")).to_have_count(0)


def test_sign_out_deletes_the_session_and_asks_again(page, gateway_url):
    calls: list[str] = []

    def session(route):
        calls.append(route.request.method)
        route.fulfill(status=204)

    open_app(page, gateway_url)
    page.unroute("**/v1/engines")
    page.route("**/v1/engines", answer(401, {"detail": "API key required"}))
    page.route("**/v1/auth/session", session)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert calls == ["DELETE"]


# ---- engine states


def test_missing_engines_show_their_detail_and_hint_and_disable_the_panels(page, gateway_url):
    engines = {"engines": [
        {"kind": "tts", "id": "pocket", "default": True, "state": "missing",
         "detail": "no model.safetensors in /data/models/pocket", "hint": "voxgate fetch pocket"},
        {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "failed", "detail": "the sidecar exited 1"},
    ]}
    open_app(page, gateway_url, engines)
    expect(page.locator("#tts-note")).to_have_text(
        "The pocket engine is unavailable: no model.safetensors in /data/models/pocket. voxgate fetch pocket")
    expect(page.locator("#tts-note code")).to_have_text("voxgate fetch pocket")
    expect(page.locator("#asr-note")).to_have_text("Speech recognition is unavailable: the sidecar exited 1.")
    expect(page.get_by_role("button", name="Start dictation")).to_be_disabled()
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_disabled()


def test_a_gateway_without_engines_says_how_to_enable_them(page, gateway_url):
    page.goto(gateway_url + "/")  # the real gateway, started with --engines none
    expect(page.locator("#asr-note")).to_contain_text("--engines asr")
    expect(page.locator("#tts-note")).to_contain_text("--engines pocket")
    expect(page.get_by_role("button", name="Start dictation")).to_be_disabled()


# ---- dictation socket


class FakeSocket:
    """A WebSocket route that records what the page sent and lets the test answer."""

    def __init__(self, page, pattern: str, ready: dict | None):
        self.route = None
        self.url = ""
        self.binary: list[bytes] = []
        self.text: list[dict] = []
        self.ready = ready
        page.route_web_socket(pattern, self._accept)

    def _accept(self, route) -> None:
        self.route = route
        self.url = route.url
        route.on_message(self._received)
        if self.ready is not None:
            route.send(json.dumps(self.ready))

    def _received(self, message) -> None:
        if isinstance(message, bytes):
            self.binary.append(message)
        else:
            self.text.append(json.loads(message))

    def send(self, event: dict) -> None:
        self.route.send(json.dumps(event))


def wait_for(page, predicate, what: str) -> None:
    for _ in range(150):
        if predicate():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {what}")


DICTATION_READY = {"type": "ready", "session": "dic-1", "protocol": 1, "sample_rate": 48000,
                   "encoding": "pcm_s16le", "language": "auto", "model": "tiny.en"}


def test_dictation_streams_s16le_at_the_context_rate_and_renders_partials_and_finals(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 30, "1.5 s of microphone audio on the socket")
    rate = page.evaluate("(async () => { const c = new AudioContext(); const r = c.sampleRate; await c.close(); return r; })()")
    assert fake.url.endswith(f"/v1/dictation?sample_rate={rate}&encoding=pcm_s16le")
    assert all(len(chunk) == 2 * round(rate * 0.05) for chunk in fake.binary)
    audio = b"".join(fake.binary)
    samples = struct.unpack(f"<{len(audio) // 2}h", audio)
    assert max(abs(s) for s in samples) > 1000  # the fake device beeps once a second: real audio, not zeros

    fake.send({"type": "speech_started", "utterance": 0, "at": 0.4})
    fake.send({"type": "partial", "utterance": 0, "text": "turn on the kit", "stable": "turn on", "start": 0.4, "end": 1.2})
    expect(page.locator("#partial .stable")).to_have_text("turn on")
    expect(page.locator("#partial .unstable")).to_have_text(" the kit")
    fake.send({"type": "final", "utterance": 0, "text": "Turn on the kitchen lights.", "start": 0.4, "end": 2.3,
               "language": "en"})
    expect(page.locator("#finals p")).to_have_text(["Turn on the kitchen lights."])
    expect(page.locator("#partial")).to_have_text("")
    expect(page.locator("#finals")).to_have_attribute("aria-live", "polite")
    fake.send({"type": "error", "code": "asr_unavailable", "message": "the recognizer is restarting", "retryable": True})
    expect(page.locator("#dictation-problem")).to_have_text(
        "the recognizer is restarting (asr_unavailable) — retrying, nothing is lost.")

    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.send({"type": "closed", "utterances": 1, "audio_s": 3.2})
    fake.route.close(code=1000, reason="")
    expect(page.locator("#dictation-state")).to_have_text("Done: 1 utterance(s), 3.2 s of audio.")
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()
    assert fake.text == [{"type": "end"}]


@pytest.mark.parametrize(("code", "reason", "shown"), [
    (1013, "", "The gateway is busy (too many dictation sessions right now). Try again in a moment."),
    (4400, "sample_rate: must be 8000..48000", "Dictation stopped: bad request: sample_rate: must be 8000..48000."),
    (1011, "the recognizer cannot start", "Dictation stopped because of a server error: the recognizer cannot start."),
    (1008, "browser origin rejected", "Dictation was refused by the gateway: browser origin rejected."),
])
def test_dictation_close_codes_are_explained(page, gateway_url, code, reason, shown):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    fake.route.close(code=code, reason=reason)
    expect(page.locator("#dictation-problem")).to_have_text(shown)
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()


def test_a_refused_socket_sends_the_page_back_to_the_gate(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.unroute("**/v1/engines")
    page.route("**/v1/engines", answer(401, {"detail": "PIN required"}))
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    fake.route.close(code=1008, reason="PIN required")
    expect(page.get_by_label("PIN shown by the gateway's owner")).to_be_visible()


# ---- TTS socket


def test_tts_player_schedules_each_frame_right_after_the_previous_one(page, gateway_url):
    page.add_init_script(RECORD_STARTS)
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url)
    expect(page.get_by_label("Voice")).to_have_value("pocket/marius")
    page.get_by_label("Voice").select_option("pocket/alba")
    page.get_by_label("Text to speak").fill("Two frames, please.")
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    rate = int(re.search(r"sample_rate=(\d+)", fake.url).group(1))
    assert "encoding=pcm_f32le" in fake.url and "voice=alba" in fake.url and "engine=pocket" in fake.url
    fake.send({"type": "ready", "protocol": 1, "engine": "pocket", "voice": "alba", "sample_rate": rate,
               "encoding": "pcm_f32le", "frame_samples": 1920})
    wait_for(page, lambda: fake.text, "the speak message")
    assert fake.text == [{"type": "speak", "text": "Two frames, please.", "id": "page-1"}]
    fake.send({"type": "start", "id": "page-1", "text": "Two frames, please."})
    frame = rate * 80 // 1000
    tone = struct.pack(f"<{frame}f", *([0.25, -0.25] * (frame // 2)))
    for _ in range(3):
        fake.route.send(tone)
    fake.send({"type": "end", "id": "page-1", "frames": 3, "audio_s": 0.24, "ttfa_ms": 95.2, "rtf": 0.31})
    expect(page.locator("#tts-stats")).to_have_text(
        "First audio after 95 ms · real-time factor 0.31 · 0.24 s of audio in 3 frames")
    starts = page.evaluate("window.__starts")
    assert [s["rate"] for s in starts] == [rate] * 3
    assert [round(s["duration"] * rate) for s in starts] == [frame] * 3
    for before, after in itertools.pairwise(starts):
        assert after["when"] == pytest.approx(before["when"] + before["duration"], abs=1e-9)
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message after the utterance")


def test_tts_stop_cancels_on_the_socket(page, gateway_url):
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    fake.send({"type": "ready", "protocol": 1, "engine": "pocket", "voice": "marius", "sample_rate": 24000,
               "encoding": "pcm_f32le", "frame_samples": 1920})
    fake.send({"type": "start", "id": "page-1", "text": "..."})
    page.get_by_role("button", name="Stop speaking").click()
    wait_for(page, lambda: {"type": "cancel"} in fake.text, "the cancel message")
    fake.send({"type": "cancelled", "id": "page-1", "frames_sent": 4})
    expect(page.locator("#tts-state")).to_have_text("Stopped after 4 frames.")
    wait_for(page, lambda: fake.text[-1] == {"type": "end"}, "the end message after cancel")
    fake.send({"type": "closed"})
    fake.route.close(code=1000, reason="")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Stop speaking")).to_be_disabled()


def test_dictation_stopped_before_the_session_is_ready_ends_quietly(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: fake.text == [{"type": "end"}], "the end message")
    assert fake.binary == []  # no audio is sent before `ready`
    fake.route.close(code=1000, reason="")
    expect(page.locator("#dictation-state")).to_have_text("Stopped.")
    expect(page.locator("#dictation-problem")).to_have_text("")
