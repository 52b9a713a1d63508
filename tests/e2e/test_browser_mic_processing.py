"""The page's own microphone setting (echo cancellation, noise suppression and
automatic gain on) transcribes three held-out Piper sentences, played by Chromium's
fake microphone through the page into a real gateway (Whisper tiny.en), as well as
tiny.en transcribes them. The comparison of every setting is a benchmark
(bench/browser_processing.py): run to run it moves by more than the settings differ.
"""

from __future__ import annotations

import pytest

from tests.e2e.browser_support import launch_chromium, playwright_api
from tests.e2e.gateway_process import running_gateway
from tests.e2e.mic_processing import MODES, PAGE_MODE, SENTENCES, clip, dictate
from tests.support.speech import wer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MAX_PIPER_WER = 0.25  # tiny.en on these sentences: 0.16


def test_the_pages_own_processing_transcribes_piper_sentences(tmp_path):
    path = clip("piper", tmp_path)
    with running_gateway(tmp_path / "data", "asr", env={"VOXGATE_ASR_THREADS": "2"}, start_timeout_s=120) as gw, \
            playwright_api.sync_playwright() as p:
        browser = launch_chromium(p, f"--use-file-for-fake-audio-capture={path}%noloop")
        try:
            text = dictate(browser, gw.url, MODES[PAGE_MODE])
        finally:
            browser.close()
    assert wer(" ".join(SENTENCES), text) <= MAX_PIPER_WER, text
