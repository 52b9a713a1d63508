"""Dictating a clip through the page with the browser's audio processing forced on or
off: the microphone's file, a page run with the processing switches set, and the
settings compared. Used by tests/e2e/test_browser_mic_processing.py (the page's
own setting) and bench/browser_processing.py (every setting, both voices).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.browser_support import (
    DESKTOP,
    UI_TIMEOUT_MS,
    expect,
    sentences_with_pauses,
    write_microphone,
)

SENTENCES = ["The birch canoe slid on the smooth planks.",
             "Glue the sheet to the dark blue background.",
             "These days a chicken leg is a rare dish."]
GAP_S = 1.5       # silence between the sentences: each one ends its utterance
TRANSCRIPT_TIMEOUT_MS = 180000

# The processing each run forces; "all on" is what the page asks for.
MODES = {
    "off": {"echoCancellation": False, "noiseSuppression": False, "autoGainControl": False},
    "all on": {"echoCancellation": True, "noiseSuppression": True, "autoGainControl": True},
    "echo+gain": {"echoCancellation": True, "noiseSuppression": False, "autoGainControl": True},
}
PAGE_MODE = "all on"

# Forces the processing switches of every microphone request to `window.__processing`.
FORCE_PROCESSING = """
(() => {
  const original = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = (constraints) => {
    const audio = {...(constraints.audio || {}), ...window.__processing};
    return original({...constraints, audio});
  };
})();
"""


def clip(voice: str, directory: Path) -> Path:
    """The three sentences in one voice, with a pause after each, as the microphone's file."""
    audio = sentences_with_pauses(SENTENCES, GAP_S, lead_s=1.0, tail_s=2.0, voice=voice)
    return write_microphone(directory / f"{voice}.wav", audio)


def dictate(browser, url: str, processing: dict[str, bool]) -> str:
    """Everything the page transcribed from one play of the microphone's file."""
    context = browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    page.add_init_script(FORCE_PROCESSING + f"window.__processing = {json.dumps(processing)};")
    page.goto(url + "/")
    expect(page.locator("#asr-note")).to_have_text("Recognizer: tiny.en.")
    page.get_by_role("button", name="Start dictation").click()
    expect(page.locator("#finals p")).to_have_count(len(SENTENCES), timeout=TRANSCRIPT_TIMEOUT_MS)
    page.get_by_role("button", name="Stop dictation").click()
    expect(page.locator("#dictation-state")).to_contain_text("Done: ", timeout=30000)
    text = " ".join(page.locator("#finals p").all_inner_texts())
    page.evaluate("localStorage.clear()")
    context.close()
    return text
