"""OmniVoice: the engine's sentence streaming vs the package's whole-text ``generate``, one run.

    flock /tmp/voxgate-bench.lock python bench/omnivoice.py [--model DIR] [--device auto|cpu|cuda]
                                                             [--steps N] [--rounds N]

Without ``--model`` a tiny random OmniVoice (engines/omnivoice/random_model.py:
the real 24 kHz / 25 Hz / 8-quantizer geometry, small widths) is built in a
temporary directory: its figures are a CPU regression figure for the adapter's
overhead (framing, worker hand-off, prefetch), not a speed of the real model.
With ``--model`` pointing at the released weights, and a GPU, they are the real thing.

Measured, best of ``--rounds`` (default 3) each:
- per sentence: generation seconds, audio seconds, RTF (generation / audio; < 1 is
  faster than real time), through the engine exactly as the gateway uses it;
- the utterance: time to first audio (open to first frame) and whether playback
  started at the first frame would have played through without a gap (sentence
  n+1 is generated while n plays);
- the reference: the package's ``model.generate`` on the whole text, whose first
  audio exists only at its end (its TTFA is its whole generation time), side by side;
- 1 and 4 sessions at once (the engine serialises generation on one worker):
  TTFA per session (mean, max) and aggregate RTF (wall seconds / audio seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file is bench/omnivoice.py: with bench/ on the path, ``import omnivoice`` would find it, not the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from engines.base import SynthesisOptions  # noqa: E402
from engines.omnivoice.backend import LoadSpec, load_backend  # noqa: E402
from engines.omnivoice.engine import OmniVoiceEngine  # noqa: E402
from gateway.app import speech_units  # noqa: E402

TEXT = ("The station was quiet when the last train pulled in. A few travellers stepped onto the platform. "
        "Somewhere a door closed, and the lights flickered once. Then the night settled over the town again.")


class Timed:
    """The backend with each ``generate`` timed (seconds, audio seconds) per sentence."""

    def __init__(self, inner, log: list[tuple[str, float, float]]) -> None:
        self._inner, self._log = inner, log

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def generate(self, text: str, **kw):
        start = time.perf_counter()
        audio = self._inner.generate(text, **kw)
        self._log.append((text, time.perf_counter() - start, len(audio) / self._inner.sample_rate))
        return audio


async def one_utterance(engine: OmniVoiceEngine, rate: int, seed: int) -> dict:
    opened = time.perf_counter()
    stream = engine.open_stream(TEXT, options=SynthesisOptions(seed=seed))
    first = None
    arrivals: list[tuple[float, int]] = []  # (time, samples) per frame
    async for frame in stream.frames():
        now = time.perf_counter()
        first = first if first is not None else now
        arrivals.append((now, len(frame)))
    # Playback from the first frame: every frame must have arrived before it is due.
    played, gapless = 0, True
    for at, samples in arrivals:
        if at - first > played / rate + 1e-3:
            gapless = False
        played += samples
    return {"ttfa_s": first - opened, "wall_s": arrivals[-1][0] - opened, "audio_s": played / rate,
            "gapless": gapless}


async def sessions(engine: OmniVoiceEngine, rate: int, count: int) -> dict:
    start = time.perf_counter()
    results = await asyncio.gather(*(one_utterance(engine, rate, seed=n) for n in range(count)))
    wall = time.perf_counter() - start
    ttfa = [r["ttfa_s"] for r in results]
    return {"ttfa_mean_s": statistics.mean(ttfa), "ttfa_max_s": max(ttfa),
            "rtf": wall / sum(r["audio_s"] for r in results), "gapless": all(r["gapless"] for r in results)}


async def run(args: argparse.Namespace, model: str) -> None:
    log: list[tuple[str, float, float]] = []
    spec = LoadSpec(model=model, device=args.device, num_step=args.steps)
    engine = OmniVoiceEngine(spec, Path(args.work) / "voices", Path(args.work) / "cache",
                             split_sentences=speech_units, loader=lambda s: Timed(load_backend(s), log),
                             max_streams=8)
    await engine.load()
    if engine.status().state.value != "ready":
        raise SystemExit(f"OmniVoice is not ready: {engine.status()}")
    backend = engine._backend
    rate = backend.sample_rate
    print(f"model: {model}  device: {backend.device}  steps: {args.steps}  sentences: {len(speech_units(TEXT))}")
    await one_utterance(engine, rate, 0)  # warm-up: the default voice's anchor, first-call allocations
    best_single, best_sentences, best_ref = None, None, None
    for _ in range(args.rounds):
        log.clear()
        single = await one_utterance(engine, rate, 1)
        per_sentence = list(log)
        if best_single is None or single["ttfa_s"] < best_single["ttfa_s"]:
            best_single, best_sentences = single, per_sentence
        ref = await asyncio.to_thread(reference, backend, 1)
        best_ref = ref if best_ref is None or ref["wall_s"] < best_ref["wall_s"] else best_ref
    print("\nper sentence (engine, best round):")
    print(f"{'sentence':<52} {'gen s':>7} {'audio s':>8} {'RTF':>6}")
    for text, gen_s, audio_s in best_sentences:
        print(f"{text[:50]:<52} {gen_s:7.3f} {audio_s:8.2f} {gen_s / audio_s:6.3f}")
    print("\nwhole utterance:")
    print(f"  engine (sentence streaming): TTFA {best_single['ttfa_s'] * 1000:7.0f} ms, RTF "
          f"{best_single['wall_s'] / best_single['audio_s']:.3f}, gapless playback: {best_single['gapless']}")
    print(f"  package generate(whole text): TTFA {best_ref['wall_s'] * 1000:7.0f} ms, RTF "
          f"{best_ref['wall_s'] / best_ref['audio_s']:.3f}")
    print(f"  TTFA ratio package / engine: {best_ref['wall_s'] / best_single['ttfa_s']:.2f}x")
    print("\nconcurrent sessions (one worker; best round by aggregate RTF):")
    for count in (1, 4):
        best = None
        for _ in range(args.rounds):
            result = await sessions(engine, rate, count)
            best = result if best is None or result["rtf"] < best["rtf"] else best
        print(f"  {count} session(s): TTFA mean {best['ttfa_mean_s'] * 1000:7.0f} ms, max "
              f"{best['ttfa_max_s'] * 1000:7.0f} ms, aggregate RTF {best['rtf']:.3f}, all gapless: {best['gapless']}")
    await engine.close()


def reference(backend, seed: int) -> dict:
    import torch

    torch.manual_seed(seed)
    start = time.perf_counter()
    (audio,) = backend._inner.model.generate(TEXT, num_step=backend._inner.num_step)
    return {"wall_s": time.perf_counter() - start, "audio_s": len(audio) / backend.sample_rate}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="OmniVoice model directory (default: a tiny random one)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")),
                platform.processor())
    print(f"CPU: {name}")
    with tempfile.TemporaryDirectory(prefix="voxgate-omnivoice-bench-") as tmp:
        args.work = tmp
        model = args.model
        if model is None:
            from engines.omnivoice.random_model import build_random_model

            model = str(build_random_model(Path(tmp) / "tiny-model"))
        asyncio.run(run(args, model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
