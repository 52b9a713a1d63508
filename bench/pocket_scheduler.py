"""Pocket TTS batch scheduler: capacity and where each step's time goes.

    python bench/pocket_scheduler.py --model-dir DIR [--precision fp32|int8] [--streams 1,8,16,32,48]
                                     [--decoder-precision fp32|bf16|int8] [--threads N] [--text TEXT]
                                     [--rounds N]

Drives ``engines.pocket.scheduler.BatchScheduler`` directly (no gateway, no
reference) with N streams of the same text requested at once, EOS off (every
utterance runs to its length limit, so every stream does the same work). Per N it
prints:

- aggregate real-time factor (audio seconds of all streams / wall seconds);
- whether every stream was real time: each frame arrives before it is due when
  playback starts 80 ms after that stream's first frame (and the slowest stream's
  own RTF, audio seconds / seconds from request to its last frame);
- time to first frame (mean, max);
- a per-step cost breakdown, in ms per step and ms per row (per stream-frame):
  LM (the flow LM's batched forward), flow head (sampling the latents), Mimi
  (decoding, on the worker thread and on the pipelined helper thread), text
  prompts (admitting streams), hand-off (the worker blocked on the Mimi helper),
  step other (the rest of a batch step: Python bookkeeping, row moves, sampling
  noise, EOS), and loop other (the scheduler's loop outside the step: pauses,
  handing frames to the streams' event loop).

The spans come from timing wrappers put around the model's and the batch's methods
on this process's instances only (``time.perf_counter``); the engine code is not
changed. With ``--rounds`` > 1 the round with the highest aggregate RTF is shown.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FRAME_S = 0.08
PLAYBACK_DELAY_S = 0.08  # a listener starts playing 80 ms after a stream's first frame
NO_EOS = 1e9  # an EOS logit threshold nothing reaches: every utterance runs to its length limit
TEXT = "The weather today is sunny."  # EOS off: the length limit, 113 frames (9 s) a stream
SPANS = ("lm", "flow", "mimi_worker", "mimi_helper", "prompt", "handoff", "step_other", "loop_other")


class Spans:
    """Wall time per (span, thread), inclusive and exclusive of the spans nested in it.

    Installed as wrappers around methods; a span started inside another one (on the
    same thread) is its child, so ``exclusive`` is a span's own time.
    """

    def __init__(self) -> None:
        self.inclusive: collections.Counter[tuple[str, bool]] = collections.Counter()
        self.exclusive: collections.Counter[tuple[str, bool]] = collections.Counter()
        self.cpu: collections.Counter[tuple[str, bool]] = collections.Counter()  # thread CPU time
        self.cpu_exclusive: collections.Counter[tuple[str, bool]] = collections.Counter()
        self._lock = threading.Lock()
        self._local = threading.local()

    def wrap(self, owner: Any, attr: str, name: str, bound: bool = True) -> None:
        """Time ``owner.attr``; ``bound=False``: ``owner`` is a class, wrap its function."""
        inner = getattr(owner, attr)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._stack()
            stack.append([0.0, 0.0])  # wall and CPU time of the children
            start, cpu_start = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                took, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
                children = stack.pop()
                if stack:
                    stack[-1][0] += took
                    stack[-1][1] += cpu
                self._add(name, took, took - children[0], cpu, cpu - children[1])

        setattr(owner, attr, timed)

    def _stack(self) -> list[list[float]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _add(self, name: str, inclusive: float, exclusive: float, cpu: float, cpu_exclusive: float) -> None:
        key = (name, threading.current_thread().name.startswith("pocket-scheduler"))
        with self._lock:
            self.inclusive[key] += inclusive
            self.exclusive[key] += exclusive
            self.cpu[key] += cpu
            self.cpu_exclusive[key] += cpu_exclusive

    def reset(self) -> None:
        with self._lock:
            for counter in (self.inclusive, self.exclusive, self.cpu, self.cpu_exclusive):
                counter.clear()


def instrument(model: Any, sched: Any, spans: Spans) -> None:
    """Time the model's parts, this scheduler's batch steps, admissions and idle waits."""
    from engines.pocket.batch import PausableBatch, StreamBatch
    from engines.pocket.batch_decode import BatchDecoder

    spans.wrap(model.flow_lm, "step", "lm")
    spans.wrap(model.flow_lm.flow_net, "sample", "flow")
    spans.wrap(model.mimi, "decode", "mimi")
    spans.wrap(model.flow_lm, "prompt", "prompt")
    spans.wrap(sched._wake, "wait", "idle")
    # class-level: the scheduler makes its batch itself (one model per process here)
    spans.wrap(PausableBatch, "step_active", "step")
    spans.wrap(StreamBatch, "add", "admit")
    spans.wrap(BatchDecoder, "_harvest", "handoff")


def breakdown(spans: Spans, wall_s: float, cpu: bool = False) -> dict[str, float]:
    """Seconds per part over a run (see the module docstring); worker thread unless named helper.

    ``cpu``: the threads' CPU time instead of wall time (``wall_s`` is then the worker's CPU time).
    """
    inc, exc = (spans.cpu, spans.cpu_exclusive) if cpu else (spans.inclusive, spans.exclusive)
    busy = wall_s - inc[("idle", True)]
    return {"lm": inc[("lm", True)], "flow": inc[("flow", True)], "mimi_worker": inc[("mimi", True)],
            "mimi_helper": inc[("mimi", False)], "prompt": inc[("prompt", True)],
            "handoff": exc[("handoff", True)],
            "step_other": exc[("step", True)],
            "loop_other": busy - inc[("step", True)] - inc[("admit", True)] + exc[("admit", True)]}


async def run_streams(sched: Any, voice: Any, settings: Any, n: int, text: str, seed0: int) -> dict:
    start = time.perf_counter()
    streams = [sched.submit(text, voice, settings, seed=seed0 + i) for i in range(n)]

    async def collect(stream: Any) -> list[float]:
        return [time.perf_counter() async for _ in stream.frames()]

    arrivals = await asyncio.gather(*(collect(s) for s in streams))
    return summarise(arrivals, start)


def summarise(arrivals: list[list[float]], start: float) -> dict:
    audio_s, realtime, late, slowest, ttff = 0.0, True, 0, float("inf"), []
    end = start
    for times in arrivals:
        first = times[0]
        ttff.append(first - start)
        for k, arrival in enumerate(times):
            if arrival > first + PLAYBACK_DELAY_S + k * FRAME_S + 1e-9:
                realtime = False
                late += 1
        slowest = min(slowest, len(times) * FRAME_S / (times[-1] - start))
        audio_s += len(times) * FRAME_S
        end = max(end, times[-1])
    return {"rtf": audio_s / (end - start), "realtime": realtime and slowest >= 1.0, "late_frames": late,
            "slowest_rtf": slowest, "ttff_mean_ms": 1000 * sum(ttff) / len(ttff), "ttff_max_ms": 1000 * max(ttff),
            "frames": sum(len(t) for t in arrivals), "wall_s": end - start}


def measure(model_dir: Path, precision: str, levels: list[int], threads: int, text: str, rounds: int,
            pipelined: bool | None, decoder_precision: str = "fp32") -> None:
    import torch

    from engines.pocket import load_model
    from engines.pocket.decoder_precision import apply_decoder_precision
    from engines.pocket.generation import GenerationSettings
    from engines.pocket.scheduler import BatchScheduler

    torch.set_num_threads(threads)
    model = load_model(model_dir, quantize=precision == "int8")
    apply_decoder_precision(model.mimi, decoder_precision)  # as VOXGATE_POCKET_DECODER_PRECISION does; fp32: as loaded
    voice = model.load_voice("alba")
    settings = GenerationSettings(eos_threshold=NO_EOS)
    spans = Spans()
    rows_out: list[dict] = []

    async def main() -> None:
        sched = BatchScheduler(model, max_streams=max(levels), max_waiting=max(levels), threads=threads,
                               pipelined=pipelined)
        instrument(model, sched, spans)
        sched.start()
        try:
            await run_streams(sched, voice, settings, min(2, max(levels)), "Good morning.", 7)  # warm-up
            for n in levels:
                best: dict | None = None
                for _ in range(rounds):
                    spans.reset()
                    steps0, rows0 = sched.steps, sched.rows_stepped
                    worker_cpu0 = _thread_cpu(sched)
                    summary = await run_streams(sched, voice, settings, n, text, 100)
                    summary.update(n=n, steps=sched.steps - steps0, rows=sched.rows_stepped - rows0,
                                   costs=breakdown(spans, summary["wall_s"]),
                                   cpu_costs=breakdown(spans, _thread_cpu(sched) - worker_cpu0, cpu=True))
                    if best is None or summary["rtf"] > best["rtf"]:
                        best = summary
                assert best is not None
                rows_out.append(best)
                print_row(best)
        finally:
            await asyncio.to_thread(sched.close)

    asyncio.run(main())
    print("thread CPU time, ms per step / ms per row (the machine's load inflates wall time; this less so):")
    print(HEADER)
    for r in rows_out:
        print_row(r, "cpu_costs")


def _thread_cpu(sched: Any) -> float:
    """CPU seconds the scheduler's worker thread has used (Linux: per-thread clock)."""
    thread = sched._thread
    if thread is None or thread.native_id is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


HEADER = (f"{'N':>3} {'RTF':>6} {'RT':>3} {'late':>5} {'slow':>5} {'ttff':>11} {'steps':>5} {'ms/step':>8} "
          + " ".join(f"{s:>11}" for s in ("LM", "flow", "mimi(W)", "mimi(H)", "prompt", "handoff",
                                           "step-oth", "loop-oth")))


def print_row(r: dict, which: str = "costs") -> None:
    c = r[which]
    steps, rows = max(1, r["steps"]), max(1, r["rows"])
    per = []
    for name in SPANS:
        value = c[name]
        per.append(f"{1000 * value / steps:5.2f}/{1000 * value / rows:5.2f}")
    print(f"{r['n']:>3} {r['rtf']:6.2f} {'yes' if r['realtime'] else 'no':>3} {r['late_frames']:>5} "
          f"{r['slowest_rtf']:5.2f} {r['ttff_mean_ms']:5.0f}/{r['ttff_max_ms']:5.0f} {r['steps']:>5} "
          f"{1000 * r['wall_s'] / steps:8.2f} " + " ".join(f"{p:>11}" for p in per), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--precision", choices=("fp32", "int8"), default="int8")
    parser.add_argument("--decoder-precision", choices=("fp32", "bf16", "int8"), default="fp32",
                        help="Mimi decoder arithmetic")
    parser.add_argument("--streams", default="1,8,16,32,48", help="comma-separated stream counts")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2+: pipelined, half each)")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mode", choices=("auto", "pipelined", "sequential"), default="auto",
                        help="the scheduler's pipelining (auto: pipelined with 2+ threads)")
    args = parser.parse_args()
    levels = [int(x) for x in args.streams.split(",")]
    pipelined = None if args.mode == "auto" else args.mode == "pipelined"
    print(f"model {args.model_dir.name}, {args.precision}, decoder {args.decoder_precision}, "
          f"{args.threads} threads ({args.mode}), "
          f"text {args.text!r}, EOS off")
    print("costs: ms per step / ms per row (one stream's frame); RT: every stream real time; "
          "late: frames due before they arrived; slow: the slowest stream's own RTF; ttff: mean/max ms")
    print(HEADER, flush=True)
    measure(args.model_dir, args.precision, levels, args.threads, args.text, args.rounds, pipelined,
            args.decoder_precision)


if __name__ == "__main__":
    main()
