"""The browser's own audio processing (echo cancellation, noise suppression,
automatic gain) against dictation accuracy, through the real page.

    flock /work/wt/bench.lock python bench/browser_processing.py [--runs N]   # ~2 minutes a run

Three held-out Harvard sentences, spoken by Piper and by espeak-ng, are played by
Chromium's fake microphone (headless, the system chromium) into the page, which
sends them to a real gateway (Whisper tiny.en); each clip goes through once per
setting (all on, which is what the page asks for; all off; echo cancellation and
gain without noise suppression), forced by wrapping getUserMedia. Prints the word
error rate and the words of every run, and the mean per setting. Run to run, the
same clip and setting can differ by a few words (where the gateway cuts an
utterance moves with the chunk timing): compare settings over several runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.browser_support import launch_chromium, playwright_api  # noqa: E402
from tests.e2e.gateway_process import running_gateway  # noqa: E402
from tests.e2e.mic_processing import MODES, SENTENCES, clip, dictate  # noqa: E402
from tests.support.speech import wer  # noqa: E402

VOICES = ("piper", "espeak")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="passes over every voice and setting")
    args = parser.parse_args()
    reference = " ".join(SENTENCES)
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="voxgate-bench-") as tmp, \
            running_gateway(Path(tmp) / "data", "asr", env={"VOXGATE_ASR_THREADS": "2"},
                            start_timeout_s=120) as gw, playwright_api.sync_playwright() as p:
        clips = {voice: clip(voice, Path(tmp)) for voice in VOICES}
        for _ in range(args.runs):
            for voice in VOICES:
                for mode, processing in MODES.items():
                    # one browser per run: %noloop plays the file once per browser
                    browser = launch_chromium(p, f"--use-file-for-fake-audio-capture={clips[voice]}%noloop")
                    try:
                        text = dictate(browser, gw.url, processing)
                    finally:
                        browser.close()
                    rate = wer(reference, text)
                    rates.setdefault((voice, mode), []).append(rate)
                    print(f"{voice:6} {mode:9} WER {rate:.3f}: {text}", flush=True)
    print(f"\n{'setting':10} " + " ".join(f"{voice:>16}" for voice in VOICES) + f" {'mean':>6}")
    for mode in MODES:
        cells = [rates[(voice, mode)] for voice in VOICES]
        mean = sum(sum(c) for c in cells) / sum(len(c) for c in cells)
        print(f"{mode:10} " + " ".join(f"{', '.join(f'{r:.2f}' for r in c):>16}" for c in cells) + f" {mean:6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
