"""The browser client against real engines: a real `voxgate serve` process
(the ASR sidecar with Whisper tiny.en, and Pocket TTS on a tiny random-weight
checkpoint) driven by Debian's headless Chromium, whose fake microphone plays a
WAV of real speech made at test time with Piper, over and over.

The page is loaded through a relay that a test can cut (browser_proxy.py), to
drop the dictation socket the way a network does (the page resumes the session;
test_browser_resume.py has the word-for-word comparison).
The page's logic is pinned down against played answers in
test_browser_gates.py, test_browser_sockets.py and test_browser_admin.py; these
tests prove the whole path: microphone -> AudioWorklet -> s16le ->
/v1/dictation -> transcript, and text -> /v1/tts -> frames played.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.e2e.browser_proxy import dropping_proxy
from tests.e2e.browser_support import (
    DESKTOP,
    UI_TIMEOUT_MS,
    counters,
    expect,
    fake_microphone,
    launch_chromium,
    no_page_errors,
    playwright_api,
    tiny_pocket_gateway,
    wait_for,
)
from tests.support.speech import wer, words

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SENTENCE = "It's easy to tell the depth of a well."
MAX_WER = 0.25  # tiny.en on Piper's voice: about 10% on average; one sentence can be worse
START_TIMEOUT_S = 120
TRANSCRIPT_TIMEOUT_MS = 90000
SPEECH_TIMEOUT_S = 60  # the recognizer on a loaded machine
LONG_TEXT = " ".join(["The quick brown fox jumps over the lazy dog, and then it runs far away."] * 6)

# Every text the partial line showed, so a test can prove partials were rendered before the final.
RECORD_PARTIALS = """
window.__partials = [];
document.addEventListener("DOMContentLoaded", () => {
  const line = document.getElementById("partial");
  new MutationObserver(() => {
    const text = line.textContent;
    if (text) window.__partials.push({text, finals: document.querySelectorAll("#finals p").length});
  }).observe(line, {subtree: true, childList: true, characterData: true});
});
"""


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> Path:
    """The fake microphone: silence, the sentence, then silence that ends the utterance."""
    path, _ = fake_microphone(tmp_path_factory.mktemp("mic"), SENTENCE, lead_s=1.5, tail_s=3.0)
    return path


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with tiny_pocket_gateway(tmp_path_factory, START_TIMEOUT_S) as gw:
        yield gw


@pytest.fixture(scope="module")
def proxy(gateway):
    with dropping_proxy(int(gateway.url.rsplit(":", 1)[1])) as relay:
        yield relay


@pytest.fixture(scope="module")
def browser(gateway, speech_wav):
    with playwright_api.sync_playwright() as p:
        chromium = launch_chromium(p, f"--use-file-for-fake-audio-capture={speech_wav}")
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, proxy):
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(UI_TIMEOUT_MS)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    errors = no_page_errors(page)
    page.add_init_script(RECORD_PARTIALS)
    page.goto(proxy.url + "/")
    expect(page.locator("#asr-note")).to_have_text("Recognizer: tiny.en.")
    yield page
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def seconds(srt_time: str) -> float:
    hours, minutes, rest = srt_time.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(rest.replace(",", "."))


def test_live_dictation_shows_the_level_partials_and_the_spoken_sentence(page, screenshots):
    meter = page.locator("#mic-level")
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: float(meter.get_attribute("value") or 0) > 0.3, "the level meter moving with the speech",
             timeout_s=SPEECH_TIMEOUT_S)
    first_final = page.locator("#finals p").first
    expect(first_final).to_be_visible(timeout=TRANSCRIPT_TIMEOUT_MS)
    text = first_final.inner_text()
    assert wer(SENTENCE, text) <= MAX_WER, text
    partials = page.evaluate("window.__partials")
    assert [p for p in partials if p["finals"] == 0], "no partial transcript was shown before the final"
    assert counters(page)["levelUpdates"] > 20
    screenshots.take(page, "dictation")

    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#transcript-status")).to_have_text("Transcript copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == page.locator("#finals").inner_text().strip()

    page.get_by_role("button", name="Stop dictation").click()
    expect(page.locator("#dictation-state")).to_contain_text("Done: ", timeout=30000)
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()
    expect(page.locator("#dictation-problem")).to_have_text("")

    # kept across a reload, and downloadable as subtitles with the final's times in the audio
    shown = page.locator("#finals p").all_inner_texts()
    page.reload()
    expect(page.locator("#finals p")).to_have_text(shown)
    page.get_by_label("File format").select_option("srt")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download", exact=True).click()
    cue = Path(info.value.path()).read_text(encoding="utf-8").split("\n\n")[0].split("\n")
    start, end = (seconds(t) for t in cue[1].split(" --> "))
    assert cue[0] == "1" and cue[2] == shown[0]
    assert 0.5 <= start < end <= start + 10  # the sentence starts after 1.5 s of silence and lasts about 3 s


def test_push_to_talk_release_gives_a_final_with_no_silence_after_it(page, screenshots):
    page.get_by_label("Push-to-talk").check()
    page.locator("h1").click()
    page.keyboard.down("Space")
    wait_for(page, lambda: page.evaluate("window.__partials.some((p) => p.text.trim().split(/\\s+/).length >= 2)"),
             "a partial of two words while the space bar is held", timeout_s=SPEECH_TIMEOUT_S)
    page.keyboard.up("Space")
    wait_for(page, lambda: counters(page)["finalizeSent"] == 1, "finalize after the last audio")
    sent = counters(page)["audioChunksSent"]
    first_final = page.locator("#finals p").first
    expect(first_final).to_be_visible(timeout=TRANSCRIPT_TIMEOUT_MS)
    # Nothing was sent after the release, so the recognizer never heard the silence that
    # ends an utterance on its own: this final can only come from `finalize`.
    assert counters(page)["audioChunksSent"] == sent
    heard = words(first_final.inner_text())
    assert set(heard) & set(words(SENTENCE)), heard  # the start of the sentence (a cut word may be misheard)
    screenshots.take(page, "dictation-push-to-talk-final")


def test_a_dropped_connection_resumes_and_the_transcript_continues(page, proxy, screenshots):
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: page.evaluate("window.__partials.length > 0"), "the first partial",
             timeout_s=SPEECH_TIMEOUT_S)
    assert proxy.drop_all() >= 1
    wait_for(page, lambda: "dictation:resumed" in page.evaluate("window.voxgate.events"), "the resumed session")
    finals = page.locator("#finals p")
    expect(finals).to_have_count(2, timeout=TRANSCRIPT_TIMEOUT_MS)  # the sentence the drop cut, then its next loop
    events = page.evaluate("window.voxgate.events")
    assert events.index("dictation:dropped") < events.index("dictation:final")
    # the sentence was cut by the drop, but the session was resumed: heard whole
    for line in finals.all_inner_texts():
        assert wer(SENTENCE, line) <= MAX_WER, line
    assert (counters(page)["reconnects"], counters(page)["resumes"]) == (1, 1)
    screenshots.take(page, "dictation-after-reconnect")
    page.get_by_role("button", name="Stop dictation").click()
    expect(page.locator("#dictation-state")).to_contain_text("Done: ", timeout=30000)
    # every final shown counts, those of the first socket too
    done = re.match(r"Done: (\d+) utterances?, ", page.locator("#dictation-state").inner_text())
    assert done and int(done.group(1)) == finals.count() >= 2


def test_speech_plays_every_frame_and_shows_the_time_to_first_audio(page, gateway, screenshots):
    voices = httpx.get(gateway.url + "/v1/voices", timeout=10).json()
    expect(page.locator("#tts-voice option")).to_have_count(len(voices["voices"]))
    expect(page.get_by_label("Voice", exact=True)).to_have_value(voices["defaults"]["pocket"])
    page.get_by_label("Text to speak").fill("Hello from the browser.")
    page.get_by_role("button", name="Speak", exact=True).click()
    expect(page.locator("#tts-ttfa")).to_have_text(re.compile(r"^First audio after \d+ ms$"), timeout=120000)
    stats = page.locator("#tts-stats")
    expect(stats).to_contain_text("s of speech · the gateway's first audio after ", timeout=120000)
    expect(page.locator("#tts-state")).to_have_text("Done.", timeout=60000)
    frames = counters(page)["ttsFramesReceived"]
    assert frames > 0
    assert {k: counters(page)[k] for k in ("ttsFramesReceived", "ttsFramesScheduled", "ttsFramesPlayed",
                                           "ttsFramesStopped")} == {
        "ttsFramesReceived": frames, "ttsFramesScheduled": frames, "ttsFramesPlayed": frames, "ttsFramesStopped": 0}
    expect(page.locator("#tts-problem")).to_have_text("")
    screenshots.take(page, "speech")


def test_stop_cuts_the_speech_off(page):
    page.get_by_label("Text to speak").fill(LONG_TEXT)
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: counters(page)["ttsFramesScheduled"] >= 3, "the first frames", timeout_s=120)
    page.get_by_role("button", name="Stop speaking").click()
    expect(page.locator("#tts-state")).to_have_text("Stopped.", timeout=30000)
    # enabled once the server has closed the socket after the page's "end" (the cancelled
    # synthesis stops first): on a loaded machine that has taken longer than playwright's 5 s
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_enabled(timeout=30000)
    after = counters(page)
    assert after["ttsFramesStopped"] > 0  # scheduled audio was cut off, not played out
    assert after["ttsFramesPlayed"] + after["ttsFramesStopped"] == after["ttsFramesScheduled"]
    page.wait_for_timeout(500)
    assert counters(page)["ttsFramesScheduled"] == after["ttsFramesScheduled"]  # nothing more is played


def test_an_admin_adds_a_voice_by_uploading_a_wav(page, speech_wav, gateway):
    page.get_by_text("Add a voice").click()
    page.get_by_label("Name of the new voice").fill("piper-joe")
    page.get_by_label("Voice sample (a WAV file, 1 to 30 seconds of one speaker)").set_input_files(str(speech_wav))
    page.get_by_role("button", name="Clone voice").click()
    expect(page.locator("#clone-status")).to_have_text("Voice piper-joe added.", timeout=120000)
    expect(page.get_by_label("Voice", exact=True)).to_have_value("piper-joe")
    listed = httpx.get(gateway.url + "/v1/voices", timeout=10).json()["voices"]
    assert {"id": "piper-joe", "engine": "pocket", "name": "piper-joe", "language": "en", "source": "cloned"} in listed
    assert httpx.delete(gateway.url + "/v1/voices/piper-joe", timeout=30).status_code == 204


def test_sign_out_is_not_offered_on_the_gateways_own_machine(page):
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#who")).to_have_text("This computer · admin")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
