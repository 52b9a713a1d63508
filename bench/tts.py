"""Streaming TTS benchmark: voxgate's /v1/tts socket against the reference
``pocket-tts serve`` HTTP server, on the same random-weight English checkpoint
and the same texts, at 1, 2, 4 and 8 concurrent clients.

    python bench/tts.py [--model-dir DIR] [--levels 1,2,4,8] [--rounds 2] [--precision both|fp32|int8]
                        [--json out.json]

Each server runs in its own process on 127.0.0.1, one after the other (never
both at once). For every level, ``rounds`` times, N clients each ask for one
text at the same moment. Reported per server and level:

- ttfa: median time to first audio (request sent -> first PCM byte received);
- throughput: audio seconds produced per wall second over the round (all
  clients together); aggregate RTF is its inverse (wall / audio, lower is better).

Both servers run the same precision, one table per precision: ``fp32`` (float32
weights on both sides) and ``int8`` (int8 dynamic quantization of the LM's
linears on both sides: voxgate's default ``VOXGATE_POCKET_QUANTIZE=int8``, the
reference's ``serve --quantize``). Each uses all the cores it chooses by default
(voxgate: the batch scheduler; the reference: one thread per request).
A random checkpoint ends utterances on random EOS, so audio lengths differ
between the two; throughput is per audio second, so it stays comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import processes  # noqa: E402
from bench.processes import free_port, start_logged  # noqa: E402
from gateway.client.tts import TtsClient  # noqa: E402

TEXTS = (
    "The weather today is mild, with a light breeze from the west.",
    "Please remember to water the plants before you leave for work.",
    "Our meeting has moved to three o'clock in the small conference room.",
    "She opened the window and listened to the birds in the garden.",
    "The train to the city leaves every twenty minutes on weekdays.",
    "He wrote a short letter and put it in the blue envelope.",
    "Turn left at the second light, and the bakery is on your right.",
    "A good night of sleep makes the whole day feel easier.",
)
START_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 300.0
RATE = 24000


@dataclass
class Result:
    ttfa_s: float
    audio_s: float


@dataclass
class Level:
    server: str
    clients: int
    ttfas: list[float] = field(default_factory=list)
    audio_s: float = 0.0
    wall_s: float = 0.0

    @property
    def ttfa_ms(self) -> float:
        return 1000 * statistics.median(self.ttfas)

    @property
    def throughput(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s else 0.0

    def to_dict(self) -> dict:
        return {"server": self.server, "clients": self.clients, "ttfa_ms_median": round(self.ttfa_ms, 1),
                "ttfa_ms_all": [round(1000 * t, 1) for t in self.ttfas], "audio_s": round(self.audio_s, 2),
                "wall_s": round(self.wall_s, 2), "throughput_x_realtime": round(self.throughput, 3),
                "aggregate_rtf": round(1 / self.throughput, 3) if self.throughput else None}



# ---- the checkpoint and the reference's config


def ensure_model(model_dir: Path | None, work: Path) -> Path:
    if model_dir is not None:
        return model_dir
    from engines.pocket.random_checkpoint import make_random_model_dir

    dest = work / "pocket-english"
    print("writing a random English-geometry checkpoint ...", flush=True)
    make_random_model_dir(dest, geometry="english", seed=0)
    return dest


def reference_config(model_dir: Path, work: Path) -> Path:
    """A pocket-tts config that loads this checkpoint, tokenizer and geometry unchanged."""
    import yaml
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        n_bins = f.get_slice("flow_lm.conditioner.embed.weight").get_shape()[0] - 1
    import pocket_tts

    base = Path(pocket_tts.__file__).parent / "config" / "english.yaml"
    cfg = yaml.safe_load(base.read_text())
    cfg["weights_path"] = str(model_dir / "model.safetensors")
    cfg["weights_path_without_voice_cloning"] = None
    cfg["flow_lm"]["lookup_table"].update(n_bins=n_bins, tokenizer="sentencepiece",
                                          tokenizer_path=str(model_dir / "tokenizer.model"))
    path = work / "reference.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# ---- servers


async def wait_healthy(url: str, proc: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    async with httpx.AsyncClient(timeout=5) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited ({proc.returncode}); see {log_path}:\n"
                                   + log_path.read_text(errors="replace")[-2000:])
            try:
                if (await http.get(url + "/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise TimeoutError(f"{url} not healthy after {START_TIMEOUT_S:g} s; see {log_path}")


# ---- clients


async def voxgate_request(url: str, text: str) -> Result:
    async with await TtsClient.connect(url) as tts:
        utt = await tts.synthesize(text, timeout_s=REQUEST_TIMEOUT_S)
    return Result(utt.ttfa_s or 0.0, len(utt.audio) / 2 / RATE)


async def reference_request(url: str, text: str) -> Result:
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as http:
        sent = time.monotonic()
        first, size = None, 0
        async with http.stream("POST", url + "/tts", data={"text": text}) as r:
            r.raise_for_status()
            async for chunk in r.aiter_bytes():
                size += len(chunk)
                if first is None and size > 44:  # past the WAV header
                    first = time.monotonic()
    return Result((first or time.monotonic()) - sent, max(0, size - 44) / 2 / RATE)


async def run_levels(name: str, request, url: str, levels: list[int], rounds: int) -> list[Level]:
    await request(url, "Warming up.")
    out = []
    for n in levels:
        level = Level(name, n)
        for r in range(rounds):
            texts = [TEXTS[(r * n + i) % len(TEXTS)] for i in range(n)]
            started = time.monotonic()
            results = await asyncio.gather(*(request(url, t) for t in texts))
            level.wall_s += time.monotonic() - started
            level.audio_s += sum(x.audio_s for x in results)
            level.ttfas.extend(x.ttfa_s for x in results)
        print(f"  {name:9s} {n} clients: ttfa {level.ttfa_ms:7.1f} ms  throughput {level.throughput:6.2f}x "
              f"real time", flush=True)
        out.append(level)
    return out


async def measure_server(proc: subprocess.Popen, port: int, log_path: Path, name: str, request,
                         levels: list[int], rounds: int) -> list[Level]:
    """``run_levels`` against the server ``proc`` started on ``port``, once it is
    healthy; the server is stopped however it ends."""
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_healthy(url, proc, log_path)
        return await run_levels(name, request, url, levels, rounds)
    finally:
        processes.stop(proc, signal.SIGINT)


async def bench_voxgate(model_dir: Path, work: Path, levels: list[int], rounds: int,
                        precision: str) -> list[Level]:
    port = free_port()
    quantize = "int8" if precision == "int8" else "none"
    env = {**os.environ, "VOXGATE_POCKET_DIR": str(model_dir), "VOXGATE_POCKET_QUANTIZE": quantize,
           "VOXGATE_ENGINES": "pocket", "VOXGATE_DATA_DIR": str(work / "voxgate-data"),
           "VOXGATE_MAX_TTS_SESSIONS": "64", "VOXGATE_MAX_TTS_SESSIONS_PER_CLIENT": "64", "VOXGATE_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT)}
    log_path = work / "voxgate.log"
    proc = start_logged([sys.executable, "-c", "from gateway.cli.main import main; raise SystemExit(main())", "serve",
                  "--port", str(port)], env, log_path)
    return await measure_server(proc, port, log_path, "voxgate", voxgate_request, levels, rounds)


async def bench_reference(model_dir: Path, work: Path, levels: list[int], rounds: int,
                          precision: str) -> list[Level]:
    port = free_port()
    config = reference_config(model_dir, work)
    exe = Path(sys.executable).with_name("pocket-tts")
    log_path = work / "reference.log"
    quantize = ["--quantize"] if precision == "int8" else []
    proc = start_logged([str(exe), "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
                  "--default-voice", str(model_dir / "embeddings" / "alba.safetensors"), *quantize],
                 dict(os.environ), log_path)
    return await measure_server(proc, port, log_path, "reference", reference_request, levels, rounds)


def table(ours: list[Level], ref: list[Level]) -> str:
    by_n = {lvl.clients: lvl for lvl in ref}
    lines = [("| clients | voxgate TTFA (ms) | reference TTFA (ms) | voxgate throughput (x RT) | "
             "reference throughput (x RT) | voxgate agg. RTF | reference agg. RTF | throughput ratio |"),
             "|---|---|---|---|---|---|---|---|"]
    for lvl in ours:
        r = by_n.get(lvl.clients)
        if r is None:
            lines.append(f"| {lvl.clients} | {lvl.ttfa_ms:.0f} | - | {lvl.throughput:.2f} | - | "
                         f"{1 / lvl.throughput:.3f} | - | - |")
            continue
        lines.append(f"| {lvl.clients} | {lvl.ttfa_ms:.0f} | {r.ttfa_ms:.0f} | {lvl.throughput:.2f} | "
                     f"{r.throughput:.2f} | {1 / lvl.throughput:.3f} | {1 / r.throughput:.3f} | "
                     f"{lvl.throughput / r.throughput:.2f}x |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.levels.split(",")]
    precisions = ["fp32", "int8"] if args.precision == "both" else [args.precision]
    tables, results = [], []
    with tempfile.TemporaryDirectory(prefix="voxgate-bench-") as tmp:
        work = Path(tmp)
        model_dir = ensure_model(args.model_dir, work)
        for precision in precisions:
            print(f"[{precision}] voxgate /v1/tts:", flush=True)
            ours = await bench_voxgate(model_dir, work, levels, args.rounds, precision)
            ref: list[Level] = []
            if not args.skip_reference:
                print(f"[{precision}] reference pocket-tts serve:", flush=True)
                ref = await bench_reference(model_dir, work, levels, args.rounds, precision)
            tables.append(f"{precision}:\n\n{table(ours, ref)}")
            results += [{**lvl.to_dict(), "precision": precision} for lvl in ours + ref]
    print()
    print("\n\n".join(tables))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="Pocket model directory (default: write a random English-geometry one)")
    parser.add_argument("--levels", default="1,2,4,8", help="concurrent clients per level (default 1,2,4,8)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per level (default 2)")
    parser.add_argument("--precision", choices=["both", "fp32", "int8"], default="both",
                        help="weights on both sides (default both: one table each)")
    parser.add_argument("--skip-reference", action="store_true", help="only benchmark voxgate")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
