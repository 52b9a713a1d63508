"""The page as a daily dictation tool, in a real headless Chromium with the
gateway's side played by Playwright (FakeSocket): the microphone it asks for and
the picker, elapsed time, the screen wake lock, push-to-talk that releases the
microphone, the transcript kept across reloads, edited in place and downloaded,
the Done summary across a reconnect, the https note on an insecure page, the
speech panel's names and download, and no sideways scrolling at 375 px.
"""

from __future__ import annotations

import io
import math
import re
import struct
import wave
from pathlib import Path

import pytest

from tests.e2e.browser_support import (
    DESKTOP,
    DICTATION_READY,
    ENGINES_READY,
    ME_ADMIN,
    PHONE,
    TTS_READY,
    FakeSocket,
    answer,
    counters,
    expect,
    open_app,
    wait_for,
)
from tests.e2e.gateway_process import running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

WIDTHS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])

# Every getUserMedia request and every live microphone track, for the tests to read.
RECORD_MICROPHONE = """
(() => {
  window.__gum = [];
  window.__tracks = [];
  const original = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    window.__gum.push(JSON.parse(JSON.stringify(constraints)));
    const stream = await original(constraints);
    window.__tracks.push(...stream.getTracks());
    return stream;
  };
})();
"""
LIVE_TRACKS = "window.__tracks.filter((t) => t.readyState === 'live').length"

# A wake lock that records what the page asked of it.
FAKE_WAKE_LOCK = """
(() => {
  window.__wake = [];
  Object.defineProperty(navigator, "wakeLock", {value: {request: async (type) => {
    window.__wake.push("request " + type);
    const lock = new EventTarget();
    lock.release = async () => { window.__wake.push("release"); lock.dispatchEvent(new Event("release")); };
    return lock;
  }}});
})();
"""


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "none") as gw:
        yield gw.url


def no_sideways_scroll(page) -> None:
    width = page.viewport_size["width"]
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width


def start_dictation(page, gateway_url, viewport=DESKTOP) -> FakeSocket:
    page.set_viewport_size(viewport)
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 5, "audio on the socket")
    return fake


def final(n: int, text: str, start: float, end: float) -> dict:
    return {"type": "final", "utterance": n, "text": text, "start": start, "end": end, "language": "en"}


# ---- the microphone


@WIDTHS
def test_the_microphone_is_asked_with_the_measured_processing_and_the_picked_one_is_remembered(page, gateway_url, viewport):
    page.add_init_script(RECORD_MICROPHONE)
    fake = start_dictation(page, gateway_url, viewport)
    assert page.evaluate("window.__gum") == [{"audio": {
        "channelCount": 1, "echoCancellation": True, "noiseSuppression": True, "autoGainControl": True}}]
    picker = page.get_by_label("Microphone", exact=True)
    expect(picker).to_be_disabled()  # the device is fixed while dictating
    options = page.locator("#mic-device option")
    wait_for(page, lambda: options.count() >= 2, "the devices listed once the microphone is allowed")
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.route.close(code=1000, reason="")
    expect(picker).to_be_enabled()
    chosen = options.nth(1).get_attribute("value")
    picker.select_option(chosen)
    no_sideways_scroll(page)
    page.reload()
    expect(picker).to_have_value(chosen)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: page.evaluate("window.__gum.length") == 1, "the microphone request")
    assert page.evaluate("window.__gum[0].audio.deviceId") == {"ideal": chosen}


def test_elapsed_time_counts_while_dictating(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    elapsed = page.get_by_role("timer", name="Time dictating")
    expect(elapsed).to_be_hidden()
    page.clock.pause_at(page.evaluate("Date.now()") + 10)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.binary, "audio")
    expect(elapsed).to_have_text("0:00")
    page.clock.run_for(65000)
    expect(elapsed).to_have_text("1:05")
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.route.close(code=1000, reason="")
    page.clock.run_for(5000)
    expect(elapsed).to_have_text("1:05")  # the time of the last dictation stays


def test_the_screen_is_kept_awake_while_dictating(page, gateway_url):
    page.add_init_script(FAKE_WAKE_LOCK)
    fake = start_dictation(page, gateway_url)
    assert page.evaluate("window.__wake") == ["request screen"]
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.route.close(code=1000, reason="")
    wait_for(page, lambda: page.evaluate("window.__wake") == ["request screen", "release"], "the lock released")


@WIDTHS
def test_push_to_talk_can_release_the_microphone_between_presses(page, gateway_url, viewport, screenshots):
    page.set_viewport_size(viewport)
    page.add_init_script(RECORD_MICROPHONE)
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_label("Push-to-talk").check()
    page.get_by_label("Release the microphone between presses").check()
    talk = page.get_by_role("button", name="Hold to talk")
    starts = []
    for press in range(1, 4):
        before = len(fake.binary)
        talk.hover()
        page.mouse.down()
        wait_for(page, lambda b=before: len(fake.binary) >= b + 5, f"audio while held, press {press}")
        assert page.evaluate(LIVE_TRACKS) == 1
        if press == 1:
            screenshots.take(page, "dictation-push-to-talk-released")
            no_sideways_scroll(page)
        page.mouse.up()
        wait_for(page, lambda n=press: fake.text == [{"type": "finalize"}] * n, "finalize on release")
        wait_for(page, lambda: page.evaluate(LIVE_TRACKS) == 0, "the microphone given back")
        if press > 1:
            starts.append(counters(page)["micStartMs"])
    assert len(fake.connections) == 1  # the socket stays open between presses
    assert page.evaluate("window.__gum.length") == 3
    assert all(ms > 0 for ms in starts)
    shown = math.floor(starts[-1] + 0.5)  # JavaScript's Math.round: halves go up (Python's round goes to even)
    expect(page.locator("#release-hint")).to_contain_text(f"(the last one: {shown} ms)")
    print(f"\nmicrophone start after a press: {starts} ms")


# ---- the transcript


def dictate_two_lines(page, gateway_url, viewport=DESKTOP) -> FakeSocket:
    fake = start_dictation(page, gateway_url, viewport)
    fake.send(final(0, "First line.", 0.5, 1.75))
    fake.send(final(1, "Second line.", 2.0, 3.2))
    expect(page.locator("#finals p")).to_have_text(["First line.", "Second line."])
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.send({"type": "closed", "utterances": 2, "audio_s": 4.0})
    fake.route.close(code=1000, reason="")
    expect(page.locator("#dictation-state")).to_contain_text("Done: 2 utterances")
    return fake


def download(page, fmt: str) -> str:
    page.get_by_label("File format").select_option(fmt)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download", exact=True).click()
    assert info.value.suggested_filename.endswith("." + fmt)
    return Path(info.value.path()).read_text(encoding="utf-8")


@WIDTHS
def test_the_transcript_is_kept_edited_in_place_and_downloaded(page, gateway_url, viewport, screenshots):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    dictate_two_lines(page, gateway_url, viewport)
    page.reload()
    lines = page.locator("#finals p")
    expect(lines).to_have_text(["First line.", "Second line."])
    lines.first.click()
    page.keyboard.press("End")
    page.keyboard.press("Backspace")
    page.keyboard.type(", fixed.")
    page.keyboard.press("Enter")  # ends the edit; a final stays one line
    expect(lines).to_have_text(["First line, fixed.", "Second line."])
    page.get_by_role("button", name="Copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == "First line, fixed.\nSecond line."
    assert download(page, "txt") == "First line, fixed.\nSecond line."
    assert download(page, "srt") == ("1\n00:00:00,500 --> 00:00:01,750\nFirst line, fixed.\n\n"
                                     "2\n00:00:02,000 --> 00:00:03,200\nSecond line.\n")
    assert download(page, "vtt") == ("WEBVTT\n\n00:00:00.500 --> 00:00:01.750\nFirst line, fixed.\n\n"
                                     "00:00:02.000 --> 00:00:03.200\nSecond line.\n")
    no_sideways_scroll(page)
    screenshots.take(page, "transcript")
    page.reload()
    expect(lines).to_have_text(["First line, fixed.", "Second line."])  # the edit was kept too

    page.get_by_role("button", name="Clear").click()
    expect(lines).to_have_count(0)
    expect(page.locator("#transcript-status")).to_have_text("Transcript cleared.")
    page.get_by_role("button", name="Undo").click()
    expect(lines).to_have_text(["First line, fixed.", "Second line."])
    expect(page.get_by_role("button", name="Undo")).to_be_hidden()
    page.get_by_role("button", name="Clear").click()
    page.reload()
    expect(lines).to_have_count(0)
    expect(page.get_by_role("button", name="Download", exact=True)).to_be_disabled()


def test_done_counts_every_final_shown_and_times_continue_across_a_reconnect(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.clock.pause_at(page.evaluate("Date.now()") + 10)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 20, "audio on the first socket")
    fake.send(final(0, "Before the drop.", 0.1, 0.5))
    expect(page.locator("#finals p")).to_have_count(1)
    fake.route.close(code=1012, reason="")
    expect(page.locator("#dictation-state")).to_contain_text("Reconnecting in 0.5 s")
    page.clock.run_for(500)
    wait_for(page, lambda: len(fake.connections) == 2 and len(fake.binary) >= 5, "audio on the second socket")
    # the new socket's clock starts at the first unsettled chunk: 0.5 s into the dictation
    fake.send(final(0, "After it.", 0.25, 1.0))
    expect(page.locator("#finals p")).to_have_count(2)
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.send({"type": "closed", "utterances": 1, "audio_s": 1.5})  # this socket heard one
    fake.route.close(code=1000, reason="")
    expect(page.locator("#dictation-state")).to_have_text(re.compile(r"^Done: 2 utterances, \d+\.\d s of audio\.$"))
    assert page.evaluate("JSON.parse(localStorage.getItem('voxgate.transcript'))") == [
        {"text": "Before the drop.", "start": 0.1, "end": 0.5}, {"text": "After it.", "start": 0.75, "end": 1.5}]


# ---- an insecure page


@WIDTHS
def test_an_insecure_page_says_before_start_that_the_microphone_needs_https(page, gateway_url, viewport, screenshots):
    page.set_viewport_size(viewport)
    lan = "http://phone.test:8001"

    def from_gateway(route):
        path = route.request.url[len(lan):]
        route.fulfill(response=route.fetch(url=gateway_url + path))

    page.route(lan + "/**", from_gateway)
    page.route("**/v1/engines", answer(200, ENGINES_READY))
    page.route("**/v1/auth/me", answer(200, {"principal": "pin_session", "admin": False, "session": True}))
    page.goto(lan + "/")
    expect(page.locator("#app")).to_be_visible()
    assert page.evaluate("window.isSecureContext") is False
    note = page.locator("#dictation-secure")
    expect(note).to_contain_text("The microphone needs a secure page, and this one is plain http.")
    expect(note.get_by_role("link")).to_have_attribute("href", "https://phone.test:8001/")
    expect(page.get_by_role("button", name="Start dictation")).to_be_disabled()
    no_sideways_scroll(page)
    screenshots.take(page, "insecure-page")


# ---- speech


VOICES = {"voices": [
    {"id": "en_US-lessac-medium", "engine": "pocket", "name": "en_US-lessac-medium", "language": "en", "source": "builtin"},
    {"id": "marius", "engine": "pocket", "name": "Marius the narrator", "language": "en", "source": "builtin"},
    {"id": "piper-joe", "engine": "pocket", "name": "piper-joe", "language": "en", "source": "cloned"}],
    "defaults": {"pocket": "marius"}}


@WIDTHS
def test_speech_shows_readable_voices_and_downloads_what_was_spoken(page, gateway_url, viewport, screenshots):
    page.set_viewport_size(viewport)
    page.route("**/v1/voices", answer(200, VOICES))
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    page.route("**/v1/engines", answer(200, ENGINES_READY))
    page.route("**/v1/auth/me", answer(200, ME_ADMIN))
    page.goto(gateway_url + "/")
    expect(page.locator("#tts-voice option")).to_have_text(["Lessac (en-US, medium)", "Marius the narrator", "Piper Joe"])
    expect(page.locator("#tts-voice-id")).to_have_text("Voice id: marius")
    page.get_by_label("Voice", exact=True).select_option("piper-joe")
    expect(page.locator("#tts-voice-id")).to_have_text("Voice id: piper-joe")
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    rate = int(re.search(r"sample_rate=(\d+)", fake.url).group(1))
    fake.send({**TTS_READY, "voice": "piper-joe", "sample_rate": rate})
    expect(page.locator("#tts-state")).to_have_text("Preparing the speech (Piper Joe)…")
    wait_for(page, lambda: fake.text, "the speak message")
    fake.send({"type": "start", "id": "page-1", "text": "..."})
    frame = rate * 80 // 1000
    for value in (0.25, -0.5, 0.125):
        fake.route.send(struct.pack(f"<{frame}f", *([value] * frame)))
    fake.send({"type": "end", "id": "page-1", "frames": 3, "audio_s": 0.24, "ttfa_ms": 95.2, "rtf": 0.31})
    expect(page.locator("#tts-stats")).to_have_text(
        "0.2 s of speech · the gateway's first audio after 95 ms · made 3.2× faster than it plays")
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message")
    fake.send({"type": "closed"})
    fake.route.close(code=1000, reason="")
    expect(page.locator("#tts-state")).to_have_text("Done.")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download the speech (WAV)").click()
    assert info.value.suggested_filename.endswith(".wav")
    with wave.open(io.BytesIO(Path(info.value.path()).read_bytes())) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes()) == (1, 2, rate, 3 * frame)
        samples = struct.unpack(f"<{3 * frame}h", wav.readframes(3 * frame))
    assert (samples[0], samples[frame], samples[2 * frame]) == (8192, -16384, 4096)
    no_sideways_scroll(page)
    screenshots.take(page, "speech-download")


# ---- no sideways scrolling on a phone, in every state

LONG = "/home/someone/.local/share/voxgate/models/pocket-tts-checkpoint-without-any-break-in-it/weights.safetensors"
ENGINES_WITH_A_NOTE = {"engines": [
    *ENGINES_READY["engines"],
    {"kind": "tts", "id": "kokoro", "default": False, "state": "unavailable", "detail": f"weights missing at {LONG}",
     "hint": f"voxgate fetch kokoro --accept-license --dir {LONG}"}]}
SESSIONS = {"sessions": [
    {"id": f"dic-{n}-abcdef", "kind": "dictation", "client": "[2001:db8:85a3:8d3:1319:8a2e:370:7348]:51234",
     "age_s": 1234.5, "phase": "streaming", "sample_rate": 48000, "language": "auto", "audio_s": 1199.9,
     "utterances": 321, "lag_s": 0.42} for n in range(3)]}
SHARE = {"enabled": True, "pin": "482913", "port": 8001, "url": "https://192.168.100.200:8001/?pin=482913"}


def test_nothing_scrolls_sideways_at_phone_width_in_any_state(page, gateway_url, screenshots):
    page.set_viewport_size(PHONE)
    page.route("**/v1/admin/sessions", answer(200, SESSIONS))
    page.route("**/v1/admin/share", answer(200, SHARE))
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    tts = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url, engines=ENGINES_WITH_A_NOTE, me=ME_ADMIN)
    expect(page.locator("#sessions-body tr")).to_have_count(3)
    expect(page.locator("#share-qr svg")).to_be_visible()
    no_sideways_scroll(page)  # idle, signed in as admin, with a long engine note and the sessions table
    table = page.locator(".table-wrap")  # on a phone each session is a card: nothing to scroll, even inside
    assert page.evaluate("document.querySelector('.table-wrap').scrollWidth") <= table.bounding_box()["width"]
    screenshots.take(page, "admin-phone")

    page.get_by_label("Push-to-talk").check()
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.connections, "the dictation socket")
    expect(page.locator("#dictation-state")).to_contain_text("Hold to talk")
    fake.send({"type": "partial", "utterance": 0, "text": "a-partial-" * 12, "stable": "", "start": 0.0, "end": 1.0,
               "lag_s": 12.5})
    fake.send({"type": "error", "code": "asr_unavailable", "message": LONG, "retryable": True})
    expect(page.locator("#dictation-lag")).to_be_visible()
    no_sideways_scroll(page)  # dictating
    fake.send(final(0, "a-final-without-spaces-" * 8, 0.0, 1.0))
    expect(page.locator("#finals p")).to_have_count(1)
    no_sideways_scroll(page)  # with a transcript

    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: tts.route is not None, "the tts socket")
    tts.send(TTS_READY)
    tts.send({"type": "error", "code": "bad_request", "message": LONG})
    expect(page.locator("#tts-problem")).to_contain_text(LONG)
    no_sideways_scroll(page)  # the speech panel with a problem
    screenshots.take(page, "every-state-phone")
