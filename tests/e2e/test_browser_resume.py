"""The browser page resumes its dictation session on the gateway after a drop:
Debian's headless Chromium, whose fake microphone plays two Piper sentences
(noise off, so the words are the same every run) once, talks to a real
`voxgate serve` (ASR sidecar, tiny.en) through a relay that breaks the path
(tests/support/cut_relay.py). A cut of 1 s mid-sentence is resumed (the gateway's
access log shows one session opened and resumed, never a second one) and the
finals in the transcript are word for word those of an uncut run of the same
audio: the bytes the page sent, as the gateway should hold them after the resume
(what the first socket carried up to the resumed `ready`'s `resume_audio_bytes`,
then what the page sent again from there), streamed in real time on one socket
that is never cut. A cut longer than the gateway's grace ends in a new session,
with the status line saying so and the text already in the transcript kept.
test_browser_sockets.py pins the page's side of the resume down against played
answers.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.client.dictation import DictationClient
from tests.e2e.browser_support import (
    DESKTOP,
    UI_TIMEOUT_MS,
    counters,
    expect,
    launch_chromium,
    no_page_errors,
    playwright_api,
    sentences_with_pauses,
    wait_for,
    write_microphone,
)
from tests.e2e.gateway_process import running_gateway
from tests.support.cut_relay import CutRelay
from tests.support.speech import words

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Sentences tiny.en reads the same whatever the audio's alignment (the page's capture starts a few ms
# earlier or later from run to run): "Glue the sheet ..." came out "Blue the sheet ..." in one run and not
# the next, which a comparison of two runs must not hinge on.
SENTENCES = ("It's easy to tell the depth of a well.", "Help the woman get back to her feet.")
GAP_S = 2.5  # after each sentence: the first final comes well before the second sentence starts
GRACE_S = 5  # the gateway holds a dropped session this long
SHORT_CUT_S = 1.0  # resumed: the page's reconnects (after 0.5, 1, 2 s) reach the gateway well within the grace
LONG_CUT_S = GRACE_S + 1.0  # no reconnect can get through before the grace has passed
TRANSCRIPT_TIMEOUT_MS = 90000
SPEECH_TIMEOUT_S = 60
RESUMABLE_OPEN = re.compile(r'"WebSocket /v1/dictation\?[^"]*resumable=true[^"]*" \[accepted\]')
RESUME = re.compile(r'"WebSocket /v1/dictation\?resume=\*\*\*&last_seq=\d+" \[accepted\]')


class Relay:
    """A CutRelay run on its own event loop thread, for the synchronous Playwright tests."""

    def __init__(self, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.relay = CutRelay("127.0.0.1", port)
        self._call(self.relay.start())

    def _call(self, coro, timeout_s: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    @property
    def url(self) -> str:
        return self.relay.url

    def cut(self, seconds: float) -> None:
        """Close every connection and refuse new ones for ``seconds`` (returns when it carries again)."""
        self._call(self.relay.cut(seconds), timeout_s=seconds + 30)

    def dictate_uncut(self, audio: bytes, sample_rate: int) -> list[str]:
        """The finals of ``audio`` (16-bit PCM) streamed in real time on one socket, as the page opens it."""
        return self._call(finals_on_one_socket(self.url, audio, sample_rate),
                          timeout_s=len(audio) / 2 / sample_rate + 60)

    def close(self) -> None:
        self._call(self.relay.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


async def finals_on_one_socket(url: str, audio: bytes, sample_rate: int) -> list[str]:
    chunk = sample_rate // 10 * 2  # 100 ms
    async with await DictationClient.connect(url, sample_rate=sample_rate) as client:
        started = time.monotonic()
        for at in range(0, len(audio), chunk):
            await asyncio.sleep(max(0.0, started + at / 2 / sample_rate - time.monotonic()))
            await client.send_audio(audio[at:at + chunk])
        await client.end()
        return [event["text"] async for event in client.events(timeout_s=60) if event["type"] == "final"]


class SentAudio:
    """The audio the page sent on its dictation sockets, as the gateway should hold it: a resumed
    socket's ``ready`` says how many bytes the gateway had (``resume_audio_bytes``), and the page
    sends from there on."""

    def __init__(self, page) -> None:
        self.sockets: list[tuple[list[dict], list[bytes]]] = []  # (ready, binary frames) per socket
        self.sample_rate = 0
        page.on("websocket", self._opened)

    def _opened(self, ws) -> None:
        if "/v1/dictation" not in ws.url:
            return
        if not self.sockets:
            self.sample_rate = int(re.search(r"sample_rate=(\d+)", ws.url).group(1))
        ready: list[dict] = []
        frames: list[bytes] = []
        self.sockets.append((ready, frames))
        ws.on("framesent", lambda payload: frames.append(payload) if isinstance(payload, bytes) else None)

        def received(payload) -> None:
            if isinstance(payload, str) and not ready:
                message = json.loads(payload)
                if message.get("type") == "ready":
                    ready.append(message)
        ws.on("framereceived", received)

    def audio(self) -> bytes:
        held = b""
        for ready, frames in self.sockets:
            assert ready or not frames, "audio sent before the socket's ready"
            if ready and ready[0].get("resumed"):
                assert len(held) >= ready[0]["resume_audio_bytes"], (len(held), ready[0])
                held = held[:ready[0]["resume_audio_bytes"]]
            held += b"".join(frames)
        return held


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory) -> Path:
    audio = sentences_with_pauses(SENTENCES, GAP_S, lead_s=1.0, tail_s=1.0)
    return write_microphone(tmp_path_factory.mktemp("mic") / "speech.wav", audio)


@dataclass
class Gateway:
    relay: Relay
    log: Path

    def log_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[Gateway]:
    log = tmp_path_factory.mktemp("log") / "gateway.log"
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_RESUME_GRACE_S": str(GRACE_S)}
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env=env, start_timeout_s=120, log=log) as gw:
        relay = Relay(int(gw.url.rsplit(":", 1)[1]))
        try:
            yield Gateway(relay, log)
        finally:
            relay.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[playwright_api.Playwright]:
    with playwright_api.sync_playwright() as p:
        yield p


@dataclass
class Run:
    finals: list[str]
    events: list[str]
    counters: dict[str, float]
    log: list[str]  # the gateway's log lines written during the run
    sent: SentAudio


def dictate(chromium, wav: Path, gateway: Gateway, during: Callable | None = None) -> Run:
    """One play of the microphone's file, dictated until both sentences have their finals;
    ``during(page)`` runs once dictation has started."""
    # one browser per run: %noloop plays the file once per browser
    browser = launch_chromium(chromium, f"--use-file-for-fake-audio-capture={wav}%noloop")
    logged = len(gateway.log_lines())
    try:
        context = browser.new_context(viewport=DESKTOP)
        context.set_default_timeout(UI_TIMEOUT_MS)
        page = context.new_page()
        errors = no_page_errors(page)
        sent = SentAudio(page)
        page.goto(gateway.relay.url + "/")
        expect(page.locator("#asr-note")).to_have_text("Recognizer: tiny.en.")
        page.get_by_role("button", name="Start dictation").click()
        if during is not None:
            during(page)
        expect(page.locator("#finals p")).to_have_count(len(SENTENCES), timeout=TRANSCRIPT_TIMEOUT_MS)
        page.get_by_role("button", name="Stop dictation").click()
        expect(page.locator("#dictation-state")).to_contain_text("Done: ", timeout=30000)
        run = Run(page.locator("#finals p").all_inner_texts(), page.evaluate("window.voxgate.events"),
                  counters(page), gateway.log_lines()[logged:], sent)
        context.close()
        assert errors == [], f"uncaught errors in the page: {errors}"
        return run
    finally:
        browser.close()


def cut_mid_sentence(gateway: Gateway) -> Callable:
    def cut(page) -> None:
        wait_for(page, lambda: page.locator("#partial").inner_text().strip() != "", "the first partial",
                 timeout_s=SPEECH_TIMEOUT_S)
        gateway.relay.cut(SHORT_CUT_S)
    return cut


def finals_words(finals: list[str]) -> list[list[str]]:
    return [words(text) for text in finals]


def sessions_opened(log: list[str]) -> int:
    return sum(bool(RESUMABLE_OPEN.search(line)) for line in log)


def resumes_accepted(log: list[str]) -> int:
    return sum(bool(RESUME.search(line)) for line in log)


def test_a_cut_mid_sentence_is_resumed_and_the_transcript_is_that_of_an_uncut_run(chromium, speech_wav, gateway):
    cut = dictate(chromium, speech_wav, gateway, during=cut_mid_sentence(gateway))
    # the same audio on a socket never cut (not another run of the page: its capture, through the browser's
    # echo cancellation and gain control, can differ from run to run on a loaded machine)
    audio = cut.sent.audio()
    assert len(audio) >= 2 * cut.sent.sample_rate * 6  # past the first sentence and its pause
    uncut = gateway.relay.dictate_uncut(audio, cut.sent.sample_rate)
    assert len(uncut) == len(SENTENCES), uncut
    assert finals_words(cut.finals) == finals_words(uncut)
    assert (cut.counters["reconnects"], cut.counters["resumes"]) == (1, 1)
    # dropped (again for each attempt the cut relay refused), then resumed: never a new session
    moments = [e for e in cut.events if e.startswith("dictation:") and e != "dictation:final"]
    assert moments == ["dictation:dropped"] * (len(moments) - 1) + ["dictation:resumed"], cut.events
    # the gateway's side: one session, opened once and resumed (its token masked in the log)
    assert sessions_opened(cut.log) == 1, cut.log
    assert resumes_accepted(cut.log) >= 1, cut.log
    assert not any("resume=" in line and "***" not in line for line in cut.log)


def test_a_cut_longer_than_the_grace_goes_on_in_a_new_session_and_keeps_the_text(chromium, speech_wav, gateway):
    first_final: list[str] = []

    def long_cut(page) -> None:
        expect(page.locator("#finals p")).to_have_count(1, timeout=TRANSCRIPT_TIMEOUT_MS)
        first_final.append(page.locator("#finals p").first.inner_text())
        gateway.relay.cut(LONG_CUT_S)
        expect(page.locator("#dictation-state")).to_have_text(
            "Reconnected in a new session: the old one could not be resumed (the connection was down longer than "
            "the gateway holds a session). The text so far is kept. Speak now.", timeout=30000)
        expect(page.locator("#finals p").first).to_have_text(first_final[0])
        expect(page.locator("#dictation-problem")).to_have_text("")

    run = dictate(chromium, speech_wav, gateway, during=long_cut)
    # the text kept is the first session's own final, word for word. It was decoded before the cut, so another
    # run's final is no measure of it: on a loaded machine the audio a run captures (through the browser's echo
    # cancellation and gain control) can differ, and one run read "the depth of the well" where another read "a well"
    assert run.finals[0] == first_final[0]
    assert (run.counters["reconnects"], run.counters["resumes"]) == (1, 0)
    assert "dictation:resume-refused" in run.events
    assert sessions_opened(run.log) == 2, run.log  # the first, and the new one after the refused resume
    assert resumes_accepted(run.log) >= 1, run.log
