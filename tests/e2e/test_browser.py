"""The browser client against real engines: a real `voxgate serve` process
(the ASR sidecar with Whisper tiny.en, and Pocket TTS on a tiny random-weight
checkpoint) driven by Debian's headless Chromium, whose fake microphone plays a
WAV of real speech made at test time with Piper.

The gate and socket-handling logic is pinned down in test_browser_gates.py;
these tests prove the whole path: microphone -> AudioWorklet -> s16le ->
/v1/dictation -> transcript on the page, and text -> /v1/tts -> frames
scheduled on the page's AudioContext.
"""

from __future__ import annotations

import shutil
import wave
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence, wer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# The test extra installs playwright and scripts/setup.sh --test installs chromium: a missing
# one is a broken setup, so it fails rather than skips.
import playwright.sync_api as playwright_api  # noqa: E402

expect = playwright_api.expect

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "It's easy to tell the depth of a well."
MAX_WER = 0.25  # tiny.en on Piper's voice: about 10% on average; one sentence can be worse
MIC_RATE = 48000
START_TIMEOUT_S = 120
TRANSCRIPT_TIMEOUT_MS = 90000
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required",
]

# Every text the partial line showed, so a test can prove partials were rendered.
RECORD_PARTIALS = """
window.__partials = [];
document.addEventListener("DOMContentLoaded", () => {
  const line = document.getElementById("partial");
  new MutationObserver(() => {
    const stable = line.querySelector(".stable").textContent;
    const unstable = line.querySelector(".unstable").textContent;
    if (stable || unstable) window.__partials.push({stable, unstable});
  }).observe(line, {subtree: true, childList: true, characterData: true});
});
"""


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> Path:
    """The fake microphone: silence, the sentence, then silence that ends the utterance."""
    samples, rate = piper_say(SENTENCE)
    audio = np.concatenate([silence(1.5, MIC_RATE), resample(samples, rate, MIC_RATE), silence(3.0, MIC_RATE)])
    path = tmp_path_factory.mktemp("mic") / "speech.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(MIC_RATE)
        out.writeframes(pcm16(audio))
    return path


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    assert shutil.which("chromium"), "Debian's chromium is not installed (scripts/setup.sh --test installs it)"
    from engines.pocket.random_checkpoint import make_random_model_dir

    pocket_dir = tmp_path_factory.mktemp("pocket") / "tiny"
    make_random_model_dir(pocket_dir, geometry="tiny", seed=0)
    with running_gateway(tmp_path_factory.mktemp("data"), "pocket,asr", env={
            "VOXGATE_POCKET_DIR": str(pocket_dir), "VOXGATE_POCKET_QUANTIZE": "none",
            "VOXGATE_ASR_THREADS": "2", "VOXGATE_TTS_THREADS": "1"}, start_timeout_s=START_TIMEOUT_S) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def browser(gateway_url, speech_wav):
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"),
                                     args=[*CHROMIUM_ARGS, f"--use-file-for-fake-audio-capture={speech_wav}"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 900, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def test_live_dictation_shows_the_spoken_sentence(page, gateway_url, tmp_path):
    page.add_init_script(RECORD_PARTIALS)
    page.goto(gateway_url + "/")
    expect(page.locator("#asr-note")).to_have_text("Recognizer: tiny.en.")
    page.get_by_role("button", name="Start dictation").click()
    first_final = page.locator("#finals p").first
    expect(first_final).to_be_visible(timeout=TRANSCRIPT_TIMEOUT_MS)
    text = first_final.inner_text()
    assert wer(SENTENCE, text) <= MAX_WER, text
    partials = page.evaluate("window.__partials")
    assert partials, "no partial transcript was shown before the final"
    page.screenshot(path=str(tmp_path / "dictation.png"), full_page=True)

    page.get_by_role("button", name="Stop dictation").click()
    expect(page.locator("#dictation-state")).to_contain_text("Done: ", timeout=30000)
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()
    expect(page.locator("#dictation-problem")).to_have_text("")


def test_tts_player_plays_the_frames_of_the_real_engine(page, gateway_url):
    voices = httpx.get(gateway_url + "/v1/voices", timeout=10).json()
    page.goto(gateway_url + "/")
    options = page.locator("#tts-voice option")
    expect(options).to_have_count(len(voices["voices"]))
    default = voices["defaults"]["pocket"]
    expect(page.get_by_label("Voice")).to_have_value(f"pocket/{default}")
    page.get_by_label("Text to speak").fill("Hello from the browser.")
    page.get_by_role("button", name="Speak", exact=True).click()
    stats = page.locator("#tts-stats")
    expect(stats).to_contain_text("real-time factor", timeout=120000)
    frames = int(stats.inner_text().rsplit(" in ", 1)[1].split()[0])
    assert frames > 0
    expect(page.locator("#tts-state")).to_have_text("Done.", timeout=60000)
    expect(page.locator("#tts-problem")).to_have_text("")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_enabled()


def test_sign_out_on_the_gateways_own_machine_needs_no_sign_in_again(page, gateway_url):
    page.goto(gateway_url + "/")
    expect(page.locator("#app")).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith("/v1/auth/session")) as deleted:
        page.get_by_role("button", name="Sign out").click()
    assert (deleted.value.request.method, deleted.value.status) == ("DELETE", 204)
    expect(page.locator("#app")).to_be_visible()  # loopback may do everything without a credential
    expect(page.locator("#gate")).to_be_hidden()
