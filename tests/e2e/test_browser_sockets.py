"""The browser client's two sockets in a real headless Chromium, with the
gateway's side played by Playwright's WebSocket routing: what the page sends
(s16le audio, `finalize`, `end`, `cancel`), what it does with every event and
close code, push-to-talk, resuming a dropped session (and a new session, with
the unsettled audio sent again, where the gateway cannot resume it), and the
frame player. tests/e2e/test_browser.py runs the same page against the real
engines.
"""

from __future__ import annotations

import itertools
import re
import struct

import pytest

from tests.e2e.browser_support import (
    DICTATION_READY,
    ENGINES_READY,
    TTS_READY,
    FakeSocket,
    counters,
    expect,
    open_app,
    wait_for,
)
from tests.e2e.gateway_process import running_gateway

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


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


# Keeps every AudioContext the page makes, so a test can hold the page's audio clock still.
RECORD_CONTEXTS = """
(() => {
  window.__contexts = [];
  const Native = window.AudioContext;
  window.AudioContext = class extends Native {
    constructor(...args) {
      super(...args);
      window.__contexts.push(this);
    }
  };
})();
"""


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "none") as gw:
        yield gw.url


def pause_clock(page) -> None:
    """From now on the page's timers fire only when the test runs its clock."""
    page.clock.pause_at(page.evaluate("Date.now()") + 10)


def context_rate(page) -> int:
    return page.evaluate("(async () => { const c = new AudioContext(); const r = c.sampleRate; await c.close(); return r; })()")


# ---- dictation


def test_dictation_streams_s16le_at_the_context_rate_and_renders_partials_and_finals(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    expect(page.locator("#language-field")).to_be_hidden()  # tiny.en is not multilingual
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 30, "1.5 s of microphone audio on the socket")
    rate = context_rate(page)
    assert fake.url.endswith(f"/v1/dictation?sample_rate={rate}&encoding=pcm_s16le&resumable=true")
    chunks = list(fake.binary)
    assert all(len(chunk) == 2 * round(rate * 0.05) for chunk in chunks)
    samples = struct.unpack(f"<{len(b''.join(chunks)) // 2}h", b"".join(chunks))
    assert max(abs(s) for s in samples) > 1000  # the fake device beeps once a second: real audio, not zeros
    wait_for(page, lambda: page.evaluate("document.getElementById('mic-level').value") > 0.5, "the level meter")

    fake.send({"type": "speech_started", "utterance": 0, "at": 0.4})
    fake.send({"type": "partial", "utterance": 0, "text": "turn on the kit", "stable": "turn on", "start": 0.4,
               "end": 1.2, "lag_s": 0.1})
    expect(page.locator("#partial .stable")).to_have_text("turn on")
    expect(page.locator("#partial .unstable")).to_have_text(" the kit")
    expect(page.locator("#dictation-lag")).to_be_hidden()
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
    expect(page.locator("#dictation-state")).to_have_text(re.compile(r"^Done: 1 utterance, \d+\.\d s of audio\.$"))
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()
    expect(page.locator("#mic-level")).to_have_attribute("value", "0")
    assert fake.text == [{"type": "end"}]
    assert fake.latest.order[-1] == "end"  # the last audio went before it


def test_the_recognizers_lag_is_shown_while_it_is_behind(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.binary, "audio")
    partial = {"type": "partial", "utterance": 0, "text": "so", "stable": "", "start": 0.0, "end": 0.5}
    fake.send({**partial, "lag_s": 2.46})
    expect(page.locator("#dictation-lag")).to_have_text("The recognizer is 2.5 s behind.")
    fake.send({**partial, "lag_s": 0.3})
    expect(page.locator("#dictation-lag")).to_be_hidden()


def test_a_multilingual_model_offers_its_languages(page, gateway_url):
    engines = {"engines": [ENGINES_READY["engines"][0],
                           {"kind": "asr", "id": "asr", "model": "whisper-base", "state": "ready",
                            "multilingual": True, "languages": ["en", "de", "fr"]}]}
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url, engines)
    language = page.get_by_label("Language")
    expect(page.locator("#dictation-language option")).to_have_text(
        ["Detect automatically", "English (en)", "German (de)", "French (fr)"])
    language.select_option("de")
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.url, "the dictation socket")
    assert fake.url.endswith("&encoding=pcm_s16le&language=de&resumable=true")
    expect(language).to_be_disabled()  # a socket's language is fixed when it opens


@pytest.mark.parametrize(("code", "reason", "shown"), [
    (1013, "", "The gateway is busy (too many dictation sessions right now). Try again in a moment."),
    (4400, "sample_rate: must be 8000..48000", "Dictation stopped: bad request: sample_rate: must be 8000..48000."),
    (1011, "the recognizer cannot start", "Dictation stopped because of a server error: the recognizer cannot start."),
    (1008, "browser origin rejected", "Dictation was refused by the gateway: browser origin rejected."),
])
def test_dictation_close_codes_before_ready_are_explained(page, gateway_url, code, reason, shown):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    fake.route.close(code=code, reason=reason)
    expect(page.locator("#dictation-problem")).to_have_text(shown)
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()
    assert len(fake.connections) == 1  # a socket that never worked is not retried


def test_a_refused_socket_sends_the_page_back_to_the_gate(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.unroute("**/v1/engines")
    page.route("**/v1/engines", lambda route: route.fulfill(
        status=401, content_type="application/json", body='{"detail": "PIN required", "code": "pin_required"}'))
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    fake.route.close(code=1008, reason="PIN required")
    expect(page.get_by_label("PIN shown by the gateway's owner")).to_be_visible()


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


def test_push_to_talk_sends_audio_only_while_held_and_finalizes_on_release(page, gateway_url, screenshots):
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_label("Push-to-talk").check()
    talk = page.get_by_role("button", name="Hold to talk")
    expect(page.locator("#push-hint")).to_be_visible()
    talk.hover()
    page.mouse.down()
    expect(talk).to_have_attribute("aria-pressed", "true")
    wait_for(page, lambda: len(fake.binary) >= 10, "audio while the button is held")
    screenshots.take(page, "dictation-push-to-talk")
    page.mouse.up()
    wait_for(page, lambda: fake.text == [{"type": "finalize"}], "finalize on release")
    held = len(fake.binary)
    assert fake.latest.order == ["audio"] * held + ["finalize"]
    page.wait_for_timeout(500)  # ten chunks' time: none may come while the button is up
    assert len(fake.binary) == held

    page.locator("h1").click()  # the space bar talks when no control claims it
    page.keyboard.down("Space")
    wait_for(page, lambda: len(fake.binary) >= held + 5, "audio while the space bar is held")
    page.keyboard.up("Space")
    wait_for(page, lambda: fake.text == [{"type": "finalize"}] * 2, "finalize on releasing the space bar")
    assert fake.latest.order[-1] == "finalize"
    assert counters(page)["finalizeSent"] == 2
    fake.send({"type": "final", "utterance": 0, "text": "Held and said.", "start": 0.1, "end": 0.9, "language": "en"})
    expect(page.locator("#finals p")).to_have_text(["Held and said."])


def test_space_keeps_its_meaning_in_a_text_field(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_label("Push-to-talk").check()
    page.get_by_label("Text to speak").fill("a")
    page.get_by_label("Text to speak").press("Space")
    expect(page.get_by_label("Text to speak")).to_have_value("a ")
    assert fake.connections == []


RESUMABLE_READY = {**DICTATION_READY, "resume_token": "token-1"}


def chunk_bytes(page) -> int:
    return 2 * round(context_rate(page) * 0.05)


def drop_and_reconnect(page, fake) -> None:
    """Close the latest socket as a restarting server does; the page's backoff then opens the next."""
    count = len(fake.connections)
    fake.route.close(code=1012, reason="")
    expect(page.locator("#dictation-state")).to_have_text(
        "Connection lost. Reconnecting in 0.5 s (attempt 1 of 8); your audio is kept.")
    page.clock.run_for(500)
    wait_for(page, lambda: len(fake.connections) == count + 1, "the next socket")


def test_a_dropped_socket_resumes_the_session_and_sends_again_what_the_gateway_lacks(page, gateway_url, screenshots):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", RESUMABLE_READY)
    open_app(page, gateway_url)
    pause_clock(page)  # the backoff waits until the test moves the clock
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 20, "audio on the first socket")
    fake.send({"type": "speech_started", "utterance": 0, "at": 0.1, "seq": 1})
    fake.send({"type": "final", "utterance": 0, "text": "Before the drop.", "start": 0.1, "end": 0.5, "language": "en",
               "seq": 2})
    fake.send({"type": "partial", "utterance": 1, "text": "and then", "stable": "", "start": 0.6, "end": 1.0,
               "seq": 3})
    expect(page.locator("#partial")).to_have_text("and then")
    wait_for(page, lambda: len(fake.binary) >= 30, "more audio")
    first = fake.latest
    fake.ready = None  # the resumed `ready` is the test's
    drop_and_reconnect(page, fake)
    expect(page.locator("#partial")).to_have_text("and then")  # the session goes on: its partial stays
    screenshots.take(page, "dictation-reconnecting")
    assert fake.url.endswith("/v1/dictation?resume=token-1&last_seq=3")
    assert fake.binary == []  # nothing is sent before the gateway says what it lacks
    chunk = chunk_bytes(page)
    lacks_from = 25 * chunk + chunk // 2  # the gateway had 25.5 chunks of the first socket's audio
    fake.send({**RESUMABLE_READY, "resumed": True, "last_seq": 4, "resume_audio_bytes": lacks_from,
               "resume_audio_offset_s": None, "resume_token": "token-2"})
    expect(page.locator("#dictation-state")).to_have_text("Reconnected. Speak now.")
    lacking = b"".join(first.binary)[lacks_from:]
    wait_for(page, lambda: len(b"".join(fake.binary)) > len(lacking), "what the gateway lacks, then live audio")
    assert b"".join(fake.binary).startswith(lacking)
    assert len(fake.binary[0]) == chunk // 2  # the half chunk the gateway lacked, then whole ones
    assert counters(page)["replayedChunks"] >= len(first.binary) - 25  # chunks in flight at the close too
    assert (counters(page)["reconnects"], counters(page)["resumes"]) == (1, 1)
    # the missed events, one of them already applied on the old socket: each applied once
    fake.send({"type": "partial", "utterance": 1, "text": "and then", "stable": "", "start": 0.6, "end": 1.0,
               "seq": 3})
    final = {"type": "final", "utterance": 1, "text": "And after it.", "start": 0.6, "end": 1.4, "language": "en",
             "seq": 4}
    fake.send(final)
    fake.send(final)
    expect(page.locator("#finals p")).to_have_text(["Before the drop.", "And after it."])
    expect(page.locator("#partial")).to_have_text("")
    assert page.evaluate("window.voxgate.events.filter((e) => e.startsWith('dictation:'))") == [
        "dictation:final", "dictation:dropped", "dictation:resumed", "dictation:final"]
    drop_and_reconnect(page, fake)  # the next resume carries the latest token and event
    assert fake.url.endswith("/v1/dictation?resume=token-2&last_seq=4")


def test_a_drop_after_stop_is_resumed_and_the_end_goes_again(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", RESUMABLE_READY)
    open_app(page, gateway_url)
    pause_clock(page)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 10, "audio on the first socket")
    page.get_by_role("button", name="Stop dictation").click()
    wait_for(page, lambda: fake.text == [{"type": "end"}], "the end message")
    first = fake.latest
    fake.ready = None
    drop_and_reconnect(page, fake)
    received = len(b"".join(first.binary))  # every byte arrived; whether the end did, the page cannot know
    fake.send({**RESUMABLE_READY, "resumed": True, "last_seq": 0, "resume_audio_bytes": received,
               "resume_audio_offset_s": None, "resume_token": "token-2"})
    expect(page.locator("#dictation-state")).to_have_text("Finishing the last sentence…")
    wait_for(page, lambda: fake.text == [{"type": "end"}], "the end again on the resumed socket")
    assert fake.binary == []
    fake.send({"type": "final", "utterance": 0, "text": "The last words.", "start": 0.1, "end": 0.4, "language": "en",
               "seq": 1})
    fake.send({"type": "closed", "utterances": 1, "audio_s": 0.5, "seq": 2})
    fake.route.close(code=1000, reason="")
    expect(page.locator("#dictation-state")).to_have_text(re.compile(r"^Done: 1 utterance, \d+\.\d s of audio\.$"))
    expect(page.locator("#finals p")).to_have_text(["The last words."])
    expect(page.locator("#dictation-problem")).to_have_text("")


# Every socket the page opens from now on, kept so that a test can make one stall.
RECORD_SOCKETS = """(() => {
  window.__sockets = [];
  window.WebSocket = class extends window.WebSocket {
    constructor(...args) {
      super(...args);
      window.__sockets.push(this);
    }
  };
})()"""
# The latest socket's buffer no longer drains: a path gone silent.
STALL_SOCKET = """() => Object.defineProperty(window.__sockets.at(-1), "bufferedAmount", {get() { return 1e9; }})"""


def test_a_socket_whose_data_stands_still_counts_as_dropped_and_the_session_is_resumed(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", RESUMABLE_READY)
    open_app(page, gateway_url)
    pause_clock(page)
    page.evaluate(RECORD_SOCKETS)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 10, "audio on the first socket")
    page.evaluate(STALL_SOCKET)
    chunks = counters(page)["micChunks"]
    wait_for(page, lambda: counters(page)["micChunks"] >= chunks + 3, "audio held back by the full socket")
    held = len(fake.binary)
    page.clock.run_for(4900)
    assert "dictation:stalled" not in page.evaluate("window.voxgate.events")
    page.clock.run_for(200)
    wait_for(page, lambda: "dictation:stalled" in page.evaluate("window.voxgate.events"), "the stall noticed")
    expect(page.locator("#dictation-state")).to_have_text(
        "Connection lost. Reconnecting in 0.5 s (attempt 1 of 8); your audio is kept.")
    fake.ready = None
    page.clock.run_for(500)
    wait_for(page, lambda: len(fake.connections) == 2, "the resume")
    assert fake.url.endswith("/v1/dictation?resume=token-1&last_seq=0")
    first = fake.connections[0]
    assert len(first.binary) == held  # nothing more went into the full socket
    fake.send({**RESUMABLE_READY, "resumed": True, "last_seq": 0, "resume_audio_bytes": 0,
               "resume_audio_offset_s": 0.0, "resume_token": "token-2"})
    wait_for(page, lambda: len(fake.binary) > held, "all the audio again, then the held-back audio")
    assert fake.binary[:held] == first.binary


@pytest.mark.parametrize(("code", "close", "why"), [
    ("resume_unknown", 4404, "the gateway no longer knows it"),
    ("resume_expired", 4410, "the connection was down longer than the gateway holds a session"),
    ("resume_forbidden", 1008, "it belongs to another sign-in"),
    ("resume_elsewhere", 4421, "another replica of the gateway holds it, and this one answered"),
])
def test_a_resume_the_gateway_refuses_goes_on_in_a_new_session_with_the_unsettled_audio(page, gateway_url, code,
                                                                                         close, why):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", RESUMABLE_READY)
    open_app(page, gateway_url)
    pause_clock(page)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 20, "audio on the first socket")
    fake.send({"type": "final", "utterance": 0, "text": "Before the drop.", "start": 0.1, "end": 0.5, "language": "en",
               "seq": 1})
    fake.send({"type": "partial", "utterance": 1, "text": "and then", "stable": "", "start": 0.6, "end": 1.0,
               "seq": 2})
    expect(page.locator("#finals p")).to_have_text(["Before the drop."])
    first = fake.latest
    fake.ready = None
    drop_and_reconnect(page, fake)
    assert fake.url.endswith("/v1/dictation?resume=token-1&last_seq=2")
    fake.send({"type": "error", "code": code, "message": "refused", "retryable": False})
    fake.ready = {**RESUMABLE_READY, "resume_token": "token-9"}
    fake.route.close(code=close, reason=code)
    wait_for(page, lambda: len(fake.connections) == 3, "a new session at once")
    assert fake.url.endswith("&encoding=pcm_s16le&resumable=true")
    expect(page.locator("#dictation-state")).to_have_text(
        f"Reconnected in a new session: the old one could not be resumed ({why}). The text so far is kept. Speak now.")
    expect(page.locator("#finals p")).to_have_text(["Before the drop."])
    expect(page.locator("#partial")).to_have_text("")  # the new session hears the utterance from its start
    expect(page.locator("#dictation-problem")).to_have_text("")
    settled = 10  # the final ended at 0.5 s: 10 chunks
    wait_for(page, lambda: len(fake.binary) >= len(first.binary) - settled, "the unsettled audio")
    assert fake.binary[:len(first.binary) - settled] == first.binary[settled:]
    assert page.evaluate("window.voxgate.events.filter((e) => e.startsWith('dictation:'))") == [
        "dictation:final", "dictation:dropped", "dictation:resume-refused", "dictation:reconnected"]


def test_a_gateway_that_holds_no_session_after_a_drop_gets_a_plain_one(page, gateway_url):
    fake = FakeSocket(page, "**/v1/dictation*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.route is not None, "the dictation socket")
    assert fake.url.endswith("&resumable=true")
    fake.ready = DICTATION_READY
    fake.route.close(code=4400, reason="resumable: this server holds no session after a drop "
                                       "(VOXGATE_RESUME_GRACE_S=0); leave it out")
    wait_for(page, lambda: len(fake.connections) == 2, "a plain session")
    assert fake.url.endswith("&encoding=pcm_s16le")
    expect(page.locator("#dictation-state")).to_contain_text("Listening (tiny.en, ")
    expect(page.locator("#dictation-problem")).to_have_text("")
    wait_for(page, lambda: len(fake.binary) >= 5, "audio on the plain session")


def test_a_dropped_socket_of_a_gateway_that_does_not_resume_replays_the_unsettled_audio(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    pause_clock(page)  # the backoff waits until the test moves the clock
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: len(fake.binary) >= 20, "audio on the first socket")
    fake.send({"type": "speech_started", "utterance": 0, "at": 0.1})
    fake.send({"type": "final", "utterance": 0, "text": "Before the drop.", "start": 0.1, "end": 0.5, "language": "en"})
    expect(page.locator("#finals p")).to_have_text(["Before the drop."])
    fake.send({"type": "speech_started", "utterance": 1, "at": 0.6})
    fake.send({"type": "partial", "utterance": 1, "text": "and then", "stable": "", "start": 0.6, "end": 1.0})
    wait_for(page, lambda: len(fake.binary) >= 30, "more audio")
    first = fake.latest
    first.route.close(code=1012, reason="")  # the server restarts
    expect(page.locator("#dictation-state")).to_have_text(
        "Connection lost. Reconnecting in 0.5 s (attempt 1 of 8); your audio is kept.")
    expect(page.locator("#partial")).to_have_text("")  # the utterance is heard again from its start
    assert len(fake.connections) == 1
    page.clock.run_for(500)
    wait_for(page, lambda: len(fake.connections) == 2, "the second socket")
    expect(page.locator("#dictation-state")).to_contain_text("Reconnected.")
    replayed = len(first.binary) - 10  # the first 10 chunks (0.5 s) were settled by the final
    wait_for(page, lambda: len(fake.binary) >= replayed + 5, "the replay and live audio on the second socket")
    assert fake.binary[:replayed] == first.binary[10:]
    assert counters(page)["replayedChunks"] == replayed
    assert counters(page)["reconnects"] == 1
    fake.send({"type": "final", "utterance": 0, "text": "And after it.", "start": 0.0, "end": 1.0, "language": "en"})
    expect(page.locator("#finals p")).to_have_text(["Before the drop.", "And after it."])
    assert page.evaluate("window.voxgate.events.filter((e) => e.startsWith('dictation:'))") == [
        "dictation:final", "dictation:dropped", "dictation:reconnected", "dictation:final"]


def test_reconnecting_gives_up_after_the_last_attempt_fails(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    pause_clock(page)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.connections, "the first socket")
    fake.ready = None  # from now on sockets open but the session never starts
    fake.route.close(code=1001, reason="")
    for attempt in range(1, 9):
        expect(page.locator("#dictation-state")).to_contain_text(f"(attempt {attempt} of 8)")
        page.clock.run_for(8000)  # the longest backoff
        wait_for(page, lambda a=attempt: len(fake.connections) == a + 1, f"attempt {attempt}")
        fake.route.close(code=1006 if attempt % 2 else 1013, reason="")
    expect(page.locator("#dictation-problem")).to_have_text(
        "Lost the connection to the gateway; 8 attempts to reconnect failed.")
    expect(page.get_by_role("button", name="Start dictation")).to_be_enabled()


def test_copy_puts_the_transcript_on_the_clipboard_and_clear_empties_it(page, gateway_url):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    fake = FakeSocket(page, "**/v1/dictation*", DICTATION_READY)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Start dictation").click()
    wait_for(page, lambda: fake.binary, "audio")
    for n, text in enumerate(["First line.", "Second line."]):
        fake.send({"type": "final", "utterance": n, "text": text, "start": n, "end": n + 0.5, "language": "en"})
    expect(page.locator("#finals p")).to_have_count(2)
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#transcript-status")).to_have_text("Transcript copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == "First line.\nSecond line."
    page.get_by_role("button", name="Clear").click()
    expect(page.locator("#finals p")).to_have_count(0)
    expect(page.get_by_role("button", name="Copy")).to_be_disabled()
    expect(page.get_by_role("button", name="Undo")).to_be_focused()  # the disabled Clear cannot keep the focus


# ---- speech


def test_tts_player_schedules_each_frame_right_after_the_previous_one(page, gateway_url):
    page.add_init_script(RECORD_STARTS)
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url)
    expect(page.get_by_label("Voice", exact=True)).to_have_value("marius")
    expect(page.get_by_label("Engine")).to_have_value("pocket")
    page.get_by_label("Voice", exact=True).select_option("alba")
    page.get_by_label("Text to speak").fill("Two frames, please.")
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    rate = int(re.search(r"sample_rate=(\d+)", fake.url).group(1))
    assert fake.url.endswith(f"/v1/tts?encoding=pcm_f32le&engine=pocket&voice=alba&sample_rate={rate}")
    fake.send({**TTS_READY, "voice": "alba", "sample_rate": rate})
    wait_for(page, lambda: fake.text, "the speak message")
    assert fake.text == [{"type": "speak", "text": "Two frames, please.", "id": "page-1"}]
    fake.send({"type": "start", "id": "page-1", "text": "Two frames, please."})
    frame = rate * 80 // 1000
    tone = struct.pack(f"<{frame}f", *([0.25, -0.25] * (frame // 2)))
    for _ in range(3):
        fake.route.send(tone)
    expect(page.locator("#tts-ttfa")).to_have_text(re.compile(r"^First audio after \d+ ms$"))
    fake.send({"type": "end", "id": "page-1", "frames": 3, "audio_s": 0.24, "ttfa_ms": 95.2, "rtf": 0.31})
    expect(page.locator("#tts-stats")).to_have_text(
        "0.2 s of speech · the gateway's first audio after 95 ms · made 3.2× faster than it plays")
    starts = page.evaluate("window.__starts")
    assert [s["rate"] for s in starts] == [rate] * 3
    assert [round(s["duration"] * rate) for s in starts] == [frame] * 3
    for before, after in itertools.pairwise(starts):
        assert after["when"] == pytest.approx(before["when"] + before["duration"], abs=1e-9)
    wait_for(page, lambda: {"type": "end"} in fake.text, "the end message after the utterance")
    wait_for(page, lambda: counters(page)["ttsFramesPlayed"] == 3, "the three frames played to their end")
    assert {k: counters(page)[k] for k in ("ttsFramesReceived", "ttsFramesScheduled", "ttsFramesStopped")} == {
        "ttsFramesReceived": 3, "ttsFramesScheduled": 3, "ttsFramesStopped": 0}


def test_tts_stop_silences_the_page_and_cancels_on_the_socket(page, gateway_url):
    page.add_init_script(RECORD_CONTEXTS)
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url)
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    # the page resumed its audio context before it opened the socket; holding that
    # clock still means no frame can play before Stop, however slow the machine
    assert page.evaluate("Promise.all(window.__contexts.map(c => c.suspend()))"
                         ".then(() => window.__contexts.map(c => c.state))") == ["suspended"]
    fake.send(TTS_READY)
    fake.send({"type": "start", "id": "page-1", "text": "..."})
    frame = struct.pack("<1920f", *([0.1] * 1920))
    for _ in range(4):
        fake.route.send(frame)
    wait_for(page, lambda: counters(page)["ttsFramesScheduled"] == 4, "four frames scheduled")
    page.get_by_role("button", name="Stop speaking").click()
    wait_for(page, lambda: {"type": "cancel"} in fake.text, "the cancel message")
    assert {k: counters(page)[k] for k in ("ttsFramesPlayed", "ttsFramesStopped")} == {
        "ttsFramesPlayed": 0, "ttsFramesStopped": 4}
    fake.send({"type": "cancelled", "id": "page-1", "frames_sent": 4})
    expect(page.locator("#tts-state")).to_have_text("Stopped.")
    wait_for(page, lambda: fake.text[-1] == {"type": "end"}, "the end message after cancel")
    fake.send({"type": "closed"})
    fake.route.close(code=1000, reason="")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Stop speaking")).to_be_disabled()


def test_speak_is_enabled_as_soon_as_a_stopped_utterance_closes(page, gateway_url):
    page.clock.install()
    fake = FakeSocket(page, "**/v1/tts*", ready=None)
    open_app(page, gateway_url)
    pause_clock(page)  # a timer waiting out audio that Stop cut would never fire now
    page.get_by_role("button", name="Speak", exact=True).click()
    wait_for(page, lambda: fake.route is not None, "the tts socket")
    fake.send(TTS_READY)
    fake.send({"type": "start", "id": "page-1", "text": "..."})
    frame = struct.pack("<1920f", *([0.1] * 1920))
    for _ in range(100):  # 8 s of speech scheduled ahead
        fake.route.send(frame)
    wait_for(page, lambda: counters(page)["ttsFramesScheduled"] == 100, "the frames scheduled")
    page.get_by_role("button", name="Stop speaking").click()
    wait_for(page, lambda: {"type": "cancel"} in fake.text, "the cancel message")
    fake.send({"type": "cancelled", "id": "page-1", "frames_sent": 100})
    wait_for(page, lambda: fake.text[-1] == {"type": "end"}, "the end message after cancel")
    fake.send({"type": "closed"})
    fake.route.close(code=1000, reason="")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Stop speaking")).to_be_disabled()
