"""Chromium's own MediaRecorder as the client: Debian's headless Chromium
records its fake microphone (a WAV of Piper speech) as WebM/Opus, in 100 ms
slices, and sends each slice as it comes to /v1/dictation?encoding=webm of a
real `voxgate serve` with the ASR sidecar; the transcript is the sentence.
The page also decodes the gateway's speech formats with its own decoders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.browser_support import fake_microphone, tiny_pocket_gateway
from tests.support.speech import wer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

import playwright.sync_api as playwright_api  # noqa: E402  (the test extra installs it; missing is a broken setup)

SENTENCE = "Glue the sheet to the dark blue background."
MAX_WER = 0.25
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required",
]

# Record the microphone for ``seconds`` with MediaRecorder and stream every slice,
# in order, to the dictation socket; resolve with every event until the socket closes.
RECORD_AND_STREAM = """
async ([url, seconds]) => {
  const mic = await navigator.mediaDevices.getUserMedia({audio: true});
  const ws = new WebSocket(url);
  const events = [];
  ws.onmessage = (e) => events.push(JSON.parse(e.data));
  const closed = new Promise((resolve) => { ws.onclose = (e) => resolve([e.code, e.reason]); });
  await new Promise((resolve) => { ws.onopen = resolve; });
  const recorder = new MediaRecorder(mic, {mimeType: "audio/webm;codecs=opus"});
  let sending = Promise.resolve();
  const sizes = [];
  recorder.ondataavailable = (e) => {
    sizes.push(e.data.size);
    sending = sending.then(async () => ws.send(await e.data.arrayBuffer()));
  };
  const stopped = new Promise((resolve) => { recorder.onstop = resolve; });
  recorder.start(100);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  recorder.stop();
  await stopped;
  await sending;
  ws.send(JSON.stringify({type: "end"}));
  const close = await closed;
  mic.getTracks().forEach((t) => t.stop());
  return {events, close, sizes, mimeType: recorder.mimeType};
}
"""

# Fetch speech in a format (a fixed seed: the same samples every time) and let the
# browser's own decoder (decodeAudioData) read it.
DECODE_IN_BROWSER = """
async ([url, format]) => {
  const r = await fetch(url, {method: "POST", headers: {"content-type": "application/json"},
                              body: JSON.stringify({text: "Hello from the gateway.", format, seed: 7})});
  const data = await r.arrayBuffer();
  const context = new OfflineAudioContext(1, 1, 24000);
  const audio = await context.decodeAudioData(data);
  return {status: r.status, type: r.headers.get("content-type"), seconds: audio.duration, bytes: data.byteLength};
}
"""


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> tuple[Path, float]:
    return fake_microphone(tmp_path_factory.mktemp("mic"), SENTENCE, lead_s=1.0, tail_s=2.0)


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    assert shutil.which("chromium"), "Debian's chromium is not installed (scripts/setup.sh --test installs it)"
    with tiny_pocket_gateway(tmp_path_factory, start_timeout_s=120) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def page(gateway_url, speech_wav):
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"),
                                     args=[*CHROMIUM_ARGS, f"--use-file-for-fake-audio-capture={speech_wav[0]}"])
        page = chromium.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(gateway_url + "/")
        yield page
        chromium.close()
        assert errors == [], f"uncaught errors in the page: {errors}"


def test_chromium_mediarecorder_webm_transcribes(page, gateway_url, speech_wav):
    url = gateway_url.replace("http://", "ws://") + "/v1/dictation?encoding=webm&interim=false"
    result = page.evaluate(RECORD_AND_STREAM, [url, speech_wav[1]])
    assert result["mimeType"].startswith("audio/webm")
    assert len(result["sizes"]) > 10  # sent slice by slice while recording
    events = result["events"]
    assert events[0]["type"] == "ready" and (events[0]["encoding"], events[0]["sample_rate"]) == ("webm", 48000)
    assert not [e for e in events if e["type"] == "error"], events
    finals = [e["text"] for e in events if e["type"] == "final"]
    assert len(finals) == 1, events
    assert wer(SENTENCE, finals[0]) <= MAX_WER, finals[0]
    assert result["close"] == [1000, ""]


@pytest.fixture(scope="module")
def wav_seconds(page, gateway_url) -> float:
    result = page.evaluate(DECODE_IN_BROWSER, [gateway_url + "/v1/tts", "wav"])
    assert (result["status"], result["type"]) == (200, "audio/wav")
    return float(result["seconds"])


@pytest.mark.parametrize(("fmt", "media_type", "slack_s"), [
    ("mp3", "audio/mpeg", 0.08), ("opus", "audio/ogg; codecs=opus", 0.0), ("flac", "audio/flac", 0.0),
    ("aac", "audio/aac", 0.09)])
def test_chromium_decodes_the_speech_formats(page, gateway_url, wav_seconds, fmt, media_type, slack_s):
    """decodeAudioData is the browser's own demuxer and decoder: each format
    holds the WAV's audio, give or take the codec's priming."""
    result = page.evaluate(DECODE_IN_BROWSER, [gateway_url + "/v1/tts", fmt])
    assert (result["status"], result["type"]) == (200, media_type)
    assert 0.5 < wav_seconds <= result["seconds"] <= wav_seconds + slack_s + 0.001
