"""Shared pieces of the browser tests: Debian's Chromium driven by Playwright,
the gateway's answers as the tests play them, a scriptable WebSocket, the
screenshots every state leaves behind, and a real QR decoder.

The test extra installs playwright, zxing-cpp and pillow, and
scripts/setup.sh --test installs chromium: a missing one is a broken setup, so
the tests fail rather than skip.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import wave
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import playwright.sync_api as playwright_api
import pytest
import zxingcpp
from PIL import Image

from tests.e2e.gateway_process import GatewayProcess, running_gateway
from tests.support.speech import espeak_say, pcm16, piper_say, resample, silence

expect = playwright_api.expect

ROOT = Path(__file__).resolve().parents[2]
MIC_RATE = 48000  # the fake microphone's file
UI_TIMEOUT_MS = 15000
DESKTOP = {"width": 1000, "height": 900}
PHONE = {"width": 375, "height": 812}
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required",
]

ENGINES_READY = {"engines": [
    {"kind": "tts", "id": "pocket", "default": True, "state": "ready", "sample_rate": 24000, "frame_samples": 1920,
     "languages": ["en"], "can_clone": True, "default_voice": "marius"},
    {"kind": "asr", "id": "asr", "model": "tiny.en", "state": "ready", "languages": ["en"], "multilingual": False},
]}
VOICES = {"voices": [{"id": "alba", "engine": "pocket", "name": "alba", "language": "en", "source": "builtin"},
                     {"id": "marius", "engine": "pocket", "name": "marius", "language": "en", "source": "builtin"}],
          "defaults": {"pocket": "marius"}}
ME_USER = {"principal": "pin", "admin": False, "session": True}
ME_ADMIN = {"principal": "loopback", "admin": True, "session": False}
# What the fake sockets answer first, as the gateway's sockets do
DICTATION_READY = {"type": "ready", "session": "dic-1", "protocol": 1, "sample_rate": 48000,
                   "encoding": "pcm_s16le", "language": "auto", "model": "tiny.en"}
TTS_READY = {"type": "ready", "protocol": 1, "engine": "pocket", "voice": "marius", "sample_rate": 24000,
             "encoding": "pcm_f32le", "frame_samples": 1920}


def launch_chromium(p: playwright_api.Playwright, *extra_args: str) -> playwright_api.Browser:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (scripts/setup.sh --test installs it)"
    return p.chromium.launch(executable_path=chromium, args=[*CHROMIUM_ARGS, *extra_args])


def refusal(detail: str, code: str) -> dict[str, str]:
    """An auth refusal body exactly as the gateway sends it."""
    return {"detail": detail, "code": code}


def answer(status: int, body: dict | None, headers: dict[str, str] | None = None) -> Callable:
    def fulfil(route) -> None:
        if body is None:
            route.fulfill(status=status, headers=headers or {})
        else:
            route.fulfill(status=status, content_type="application/json", body=json.dumps(body), headers=headers or {})
    return fulfil


def open_app(page, gateway_url: str, engines: dict = ENGINES_READY, me: dict | None = ME_USER) -> None:
    """Load the page with these engines; ``me`` answers GET /v1/auth/me (None: the real gateway answers)."""
    page.route("**/v1/engines", answer(200, engines))
    page.route("**/v1/voices", answer(200, VOICES))
    if me is not None:
        page.route("**/v1/auth/me", answer(200, me))
    page.goto(gateway_url + "/")
    expect(page.locator("#app")).to_be_visible()


def counters(page) -> dict[str, float]:
    return page.evaluate("({...window.voxgate.counters})")


def wait_for(page, predicate: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    for _ in range(int(timeout_s * 10)):
        if predicate():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Connection:
    route: object
    url: str
    binary: list[bytes] = field(default_factory=list)
    text: list[dict] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "audio" or the type of each text message, as received


class FakeSocket:
    """A WebSocket route that records what the page sent on each connection and
    lets the test answer on the latest one."""

    def __init__(self, page, pattern: str, ready: dict | None):
        self.connections: list[Connection] = []
        self.ready = ready
        page.route_web_socket(pattern, self._accept)

    def _accept(self, route) -> None:
        conn = Connection(route, route.url)
        self.connections.append(conn)
        route.on_message(lambda message: self._received(conn, message))
        if self.ready is not None:
            route.send(json.dumps(self.ready))

    @staticmethod
    def _received(conn: Connection, message) -> None:
        if isinstance(message, bytes):
            conn.binary.append(message)
            conn.order.append("audio")
        else:
            event = json.loads(message)
            conn.text.append(event)
            conn.order.append(event.get("type", "?"))

    @property
    def latest(self) -> Connection | None:
        return self.connections[-1] if self.connections else None

    @property
    def route(self):
        return self.latest.route if self.latest else None

    @property
    def url(self) -> str:
        return self.latest.url if self.latest else ""

    @property
    def binary(self) -> list[bytes]:
        return self.latest.binary if self.latest else []

    @property
    def text(self) -> list[dict]:
        return self.latest.text if self.latest else []

    def send(self, event: dict) -> None:
        self.route.send(json.dumps(event))


class Screenshots:
    """Pictures of the page's states at desktop and phone widths, kept as test artifacts."""

    def __init__(self, directory: Path):
        self.directory = directory

    def take(self, page, name: str) -> None:
        size = page.viewport_size
        for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            page.wait_for_timeout(100)  # a frame for the layout to settle
            page.screenshot(path=str(self.directory / f"{name}-{label}.png"), full_page=True)
        page.set_viewport_size(size)


@pytest.fixture(scope="session")
def screenshots() -> Screenshots:
    """Kept in build/browser-screenshots (ignored by git), replaced by every run."""
    directory = ROOT / "build" / "browser-screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return Screenshots(directory)


def decode_qr(png: bytes) -> list[str]:
    """Every QR code zxing-cpp finds in a PNG image."""
    image = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return [result.text for result in zxingcpp.read_barcodes(image, formats=zxingcpp.BarcodeFormat.QRCode)]


def no_page_errors(page) -> list[str]:
    """Collect uncaught page errors into a list the fixture checks at the end."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        chromium = launch_chromium(p)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    errors = no_page_errors(page)
    yield page
    context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def fake_microphone(directory: Path, text: str, lead_s: float, tail_s: float) -> tuple[Path, float]:
    """The file Chromium plays as its microphone: ``lead_s`` of silence, ``text``
    spoken by Piper, ``tail_s`` of silence (16-bit mono at ``MIC_RATE``); its path
    and its length in seconds."""
    samples, rate = piper_say(text)
    audio = np.concatenate([silence(lead_s, MIC_RATE), resample(samples, rate, MIC_RATE), silence(tail_s, MIC_RATE)])
    path = directory / "speech.wav"
    write_microphone(path, audio)
    return path, len(audio) / MIC_RATE


def sentences_with_pauses(sentences: Sequence[str], gap_s: float, lead_s: float, tail_s: float,
                          voice: str = "piper") -> np.ndarray:
    """``sentences`` said one after another (Piper, steady, or espeak-ng) at ``MIC_RATE``,
    ``gap_s`` of silence after each, ``lead_s`` before the first, ``tail_s`` more at the end."""
    parts = [silence(lead_s, MIC_RATE)]
    for sentence in sentences:
        samples, rate = piper_say(sentence, steady=True) if voice == "piper" else espeak_say(sentence)
        parts += [resample(samples, rate, MIC_RATE), silence(gap_s, MIC_RATE)]
    parts.append(silence(tail_s, MIC_RATE))
    return np.concatenate(parts)


def write_microphone(path: Path, audio: np.ndarray) -> Path:
    """``audio`` (float32 at ``MIC_RATE``) as the 16-bit mono WAV Chromium plays as its microphone."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(MIC_RATE)
        out.writeframes(pcm16(audio))
    return path


@contextlib.contextmanager
def tiny_pocket_gateway(tmp_path_factory: pytest.TempPathFactory, start_timeout_s: float) -> Iterator[GatewayProcess]:
    """The gateway the page talks to: ASR and a tiny random Pocket model (seed 0)."""
    from engines.pocket.random_checkpoint import make_random_model_dir

    pocket_dir = tmp_path_factory.mktemp("pocket") / "tiny"
    make_random_model_dir(pocket_dir, geometry="tiny", seed=0)
    with running_gateway(tmp_path_factory.mktemp("data"), "pocket,asr", env={
            "VOXGATE_POCKET_DIR": str(pocket_dir), "VOXGATE_POCKET_QUANTIZE": "none",
            "VOXGATE_ASR_THREADS": "2", "VOXGATE_TTS_THREADS": "1"}, start_timeout_s=start_timeout_s) as gateway:
        yield gateway
