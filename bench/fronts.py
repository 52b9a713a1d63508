"""Fronts benchmark: every foreign wire protocol against the native socket, side by side.

    flock /tmp/voxgate-bench.lock python bench/fronts.py [--rounds 3] [--tts piper|pocket] [--pocket-dir DIR]

Starts one `voxgate serve --engines asr,TTS` with TTS as the default engine: Piper
with its bundled voice (the default), or Pocket on the given weights, else on a
random-weight checkpoint of the released English geometry made for the run (the
compute of the real model, not its voice). Then it runs every probe module of
bench/front_probes (contract in its __init__) against it, alternating probes round by
round so load drifts hit all alike:

- STT: end of speech -> first non-empty final (Piper speech, 500 ms end-of-speech
  window everywhere), p50 / p95 and the difference to native (target: within 20 ms);
- TTS: text sent -> first audio byte, p50 / p95 and the ratio to native;
- agent frameworks (Pipecat's DeepgramSTTService): the framework's own STT latency
  metric next to our clock's end of speech -> final of the same runs.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import pkgutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.front_probes as probes_pkg  # noqa: E402
from bench import processes  # noqa: E402
from bench.processes import gateway_env  # noqa: E402
from tests.support.speech import SENTENCES, piper_say, resample, silence  # noqa: E402

TTS_TEXT = "Hello there, how can I help you today?"


def load_probes() -> list:
    names = [m.name for m in pkgutil.iter_modules(probes_pkg.__path__) if m.name != "common"]
    mods = []
    for name in sorted(names):
        try:
            mods.append(importlib.import_module(f"bench.front_probes.{name}"))
        except ImportError as exc:  # a framework's client that is not installed
            print(f"probe {name} skipped: {exc}", file=sys.stderr)
    return sorted(mods, key=lambda m: m.NAME != "native")  # native first: the reference


def clips(count: int) -> list[tuple[np.ndarray, float]]:
    out = []
    for text in SENTENCES[:count]:
        samples, rate = piper_say(text)
        speech = resample(samples, rate)
        voiced = [i for i in range(0, len(speech), 320) if np.sqrt(np.mean(speech[i:i + 320] ** 2)) > 0.01]
        end_s = 0.5 + (voiced[-1] + 320) / 16000
        out.append((np.concatenate([silence(0.5), speech, silence(1.5)]), end_s))
    return out


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{cpu}, {os.cpu_count()} cores, load average {load}"


def start_gateway(tts: str, pocket_dir: Path | None, data_dir: Path) -> tuple[subprocess.Popen, str]:
    settings = {"VOXGATE_DATA_DIR": str(data_dir), "VOXGATE_TTS_ENGINE": tts, "VOXGATE_ASR_THREADS": "2"}
    if pocket_dir is not None:
        settings["VOXGATE_POCKET_DIR"] = str(pocket_dir)
    return processes.start_gateway(["--host", "127.0.0.1", "--engines", f"asr,{tts}"], gateway_env(settings),
                                   health_timeout_s=180, quiet_stdout=True)


def ms(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1000, float(np.percentile(values, 95)) * 1000


def row(name: str, values: list[float], ref: list[float] | None, ratio: bool) -> str:
    p50, p95 = ms(values)
    if ref is None:
        versus = "reference"
    elif ratio:
        versus = f"{p50 / (statistics.median(ref) * 1000):.2f}x"
    else:
        versus = f"{p50 - statistics.median(ref) * 1000:+.0f} ms"
    return f"| {name} | {len(values)} | {p50:.0f} | {p95:.0f} | {versus} |"


async def run(url: str, rounds: int, sentences: int) -> None:
    probes = load_probes()
    audio = clips(sentences)
    stt = {p.NAME: [] for p in probes if hasattr(p, "stt_final_latency")}
    tts = {p.NAME: [] for p in probes if hasattr(p, "tts_first_audio")}
    frameworks = {p.NAME: [] for p in probes if hasattr(p, "framework_stt_latency")}
    print(f"start: {machine()}", flush=True)
    for _ in range(rounds):
        for samples, end_s in audio:
            for p in probes:
                if p.NAME in stt:
                    stt[p.NAME] += await p.stt_final_latency(url, samples, speech_end_s=end_s, rounds=1)
                if p.NAME in frameworks:
                    frameworks[p.NAME] += await p.framework_stt_latency(url, samples, speech_end_s=end_s, rounds=1)
            for p in probes:  # as many TTS samples as STT ones
                if p.NAME in tts:
                    tts[p.NAME] += await p.tts_first_audio(url, TTS_TEXT, rounds=1)
    header = "| front | n | p50 ms | p95 ms | vs native (p50) |\n|---|---|---|---|---|"
    print("\nEnd of speech -> final transcript\n" + header)
    for name, values in stt.items():
        print(row(name, values, None if name == "native" else stt["native"], ratio=False))
    print("\nText -> first audio byte\n" + header)
    for name, values in tts.items():
        print(row(name, values, None if name == "native" else tts["native"], ratio=True))
    if frameworks:
        print("\nAgent frameworks: their own STT metric and our end of speech -> final, same runs\n"
              "| client | n | own metric p50 ms | p95 ms | end of speech -> final p50 ms | p95 ms |\n"
              "|---|---|---|---|---|---|")
    for p in probes:
        if p.NAME in frameworks:
            pairs = frameworks[p.NAME]
            own, ours = ms([a for a, _ in pairs]), ms([b for _, b in pairs])
            print(f"| {p.NAME} | {len(pairs)} | {own[0]:.0f} | {own[1]:.0f} | {ours[0]:.0f} | {ours[1]:.0f} |")
            print(f"  ({p.METRIC})")
    print(f"\nend: {machine()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=4)
    parser.add_argument("--tts", choices=("piper", "pocket"), default="piper", help="the TTS engine")
    parser.add_argument("--pocket-dir", type=Path, default=None, help="real Pocket weights (default: random)")
    parser.add_argument("--geometry", default="english", help="geometry of the random weights (english, tiny)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pocket_dir = args.pocket_dir
        if pocket_dir is None and args.tts == "pocket":
            from engines.pocket.random_checkpoint import make_random_model_dir

            pocket_dir = Path(tmp) / "pocket"
            make_random_model_dir(pocket_dir, geometry=args.geometry, seed=0)
        weights = args.pocket_dir or f"random {args.geometry}-geometry weights"
        print("TTS engine: " + ("Piper, bundled en_US-joe-medium" if args.tts == "piper" else f"Pocket, {weights}"))
        proc, url = start_gateway(args.tts, pocket_dir, Path(tmp) / "data")
        try:
            asyncio.run(run(url, args.rounds, args.sentences))
        finally:
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
