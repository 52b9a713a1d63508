"""The two measuring sides of ``bench/pocket.py``, each run in its own subprocess.

``run_ours`` drives our engine through one long-lived batch scheduler, as the
gateway does; ``run_reference`` drives the reference ``pocket-tts`` package, loaded
the way the parity tests load it (``tests/engines/pocket/reference_runner.py``:
its config, our random state dict, its own int8 recipe). ``import pocket_tts`` pins
torch to one thread for the whole process, so it never shares a process with ours.
"""

from __future__ import annotations

import asyncio
import copy
import os
import resource
import threading
import time
from pathlib import Path

FRAME_S = 0.08
REPEATS = 2  # single-stream runs per text and side; the best is kept
SHORT_TEXT = "Good morning, how are you?"  # 5 words
# 16 words, drawn (like STREAM_TEXT) from the words the random models' tokenizers were trained on,
# so it stays one chunk (under 50 tokens) even on the small models' 300-piece tokenizer
LONG_TEXT = "Hello world, this is a quick voice stream from the new small speech model for today."
# What each concurrent stream says: nine words of the runner's tokenizer corpus, 67 to
# 75 frames (5.4 to 6 s of audio) by geometry's tokenizer, so 32 streams of a small
# model take tens of seconds.
STREAM_TEXT = "The quick brown fox jumps over the lazy dog."
NO_EOS = 1e9  # an EOS logit threshold nothing reaches: every utterance runs to its length limit
VOICE = "alba"


def rss_mb() -> float:
    """Peak resident set size of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def summarise(streams: list[list[tuple[float, int]]], start: float) -> dict:
    """streams: per stream, (arrival time, frames) per delivery; all requested at ``start``.

    A stream is real time when (a) its audio arrived at least as fast as it plays,
    counted from the request (audio seconds / seconds from request to last frame
    >= 1), and (b) once playing, with 80 ms buffered, it never runs dry.
    """
    ttff, audio_s, realtime, end, slowest = [], 0.0, True, start, float("inf")
    for deliveries in streams:
        first = deliveries[0][0]
        ttff.append(first - start)
        k = 0
        for arrival, frames in deliveries:
            for _ in range(frames):
                realtime &= arrival <= first + FRAME_S + k * FRAME_S + 1e-9
                k += 1
        stream_rtf = k * FRAME_S / (deliveries[-1][0] - start)
        slowest = min(slowest, stream_rtf)
        realtime &= stream_rtf >= 1.0
        audio_s += k * FRAME_S
        end = max(end, deliveries[-1][0])
    return {"rtf": audio_s / (end - start), "ttff_mean_ms": 1000 * sum(ttff) / len(ttff),
            "ttff_max_ms": 1000 * max(ttff), "realtime": realtime, "slowest_stream_rtf": slowest,
            "audio_s": audio_s, "wall_s": end - start}


def best_of(runs: list[dict]) -> dict:
    """Best of the repeats, per metric (machine noise only ever makes things slower)."""
    return {"ttfa_ms": min(r["ttfa_ms"] for r in runs), "frames": runs[0]["frames"],
            "ms_per_frame": min(r["ms_per_frame"] for r in runs)}


def single(deliveries: list[tuple[float, int]], start: float) -> dict:
    first_t, first_n = deliveries[0]
    frames = sum(n for _, n in deliveries)
    later = frames - first_n
    return {"ttfa_ms": 1000 * (first_t - start), "frames": frames,
            "ms_per_frame": 1000 * (deliveries[-1][0] - first_t) / later if later else float("nan")}


# ---- our side -----------------------------------------------------------------


def run_ours(model_dir: Path, threads: int, levels: list[int], precision: str,
             decoder_precision: str = "fp32") -> dict:
    import torch

    from engines.pocket import load_model
    from engines.pocket.decoder_precision import apply_decoder_precision
    from engines.pocket.generation import GenerationSettings
    from engines.pocket.scheduler import BatchScheduler

    settings = GenerationSettings(eos_threshold=NO_EOS)
    torch.set_num_threads(threads)
    out: dict = {"single": {}, "concurrency": {}, "decoder_precision": decoder_precision}

    async def collect(stream) -> list[tuple[float, int]]:
        return [(time.perf_counter(), 1) async for _ in stream.frames()]

    async def measure(model, voice, n_threads: int, singles: bool, conc_levels: list[int]) -> tuple[dict, dict]:
        # One long-lived scheduler, as in the gateway: its threads are warm.
        sched = BatchScheduler(model, max_streams=max([1, *conc_levels]), max_waiting=64, threads=n_threads)
        sched.start()

        async def session(n_streams: int, text: str, seed0: int) -> tuple[list, float]:
            start = time.perf_counter()
            streams = [sched.submit(text, voice, settings, seed=seed0 + i) for i in range(n_streams)]
            return await asyncio.gather(*(collect(s) for s in streams)), start

        try:
            await session(2, SHORT_TEXT, 99)  # warm-up
            singles_out, conc = {}, {}
            for name, text in (("short", SHORT_TEXT), ("long", LONG_TEXT)) if singles else (("long", LONG_TEXT),):
                runs = []
                for _ in range(REPEATS):
                    (deliveries,), start = await session(1, text, 1)
                    runs.append(single(deliveries, start))
                singles_out[name] = best_of(runs)
            for n in conc_levels:
                results, start = await session(n, STREAM_TEXT, 100)
                conc[str(n)] = summarise(results, start)
        finally:
            await asyncio.to_thread(sched.close)
        return singles_out, conc

    for prec in ("fp32", "int8"):
        model = load_model(model_dir, quantize=prec == "int8")
        apply_decoder_precision(model.mimi, decoder_precision)  # fp32: as loaded
        voice = model.load_voice(VOICE)
        levels_here = levels if prec == precision else []
        out["single"][prec], conc = asyncio.run(measure(model, voice, threads, True, levels_here))
        if conc:
            out["concurrency"] = conc
        if threads > 1:  # the thread setting, measured: the same stream on one thread
            out["single"][f"{prec}_1_thread"], _ = asyncio.run(measure(model, voice, 1, False, []))
        out[f"rss_after_{prec}_mb"] = rss_mb()
        del model
    out["peak_rss_mb"] = rss_mb()
    return out


# ---- the reference --------------------------------------------------------------


def run_reference(model_dir: Path, threads: int, levels: list[int], precision: str,
                  copies_mb: float) -> dict:
    """The reference at 1 torch thread (its default) and at ``threads``; the better is kept.

    Concurrency, per stream count: one stream at a time (at the thread count that gave
    its best int8/fp32 single stream), and one Python thread per stream with its own
    model copy and 1 torch thread, when that many copies fit in ``copies_mb``.
    """
    import torch

    from tests.engines.pocket.reference_runner import load_reference

    torch.set_num_threads(threads)  # the import pinned it to 1
    out: dict = {"single": {}, "concurrency": {}, "skipped": []}

    def stream(model, state, text: str, seed: int | None) -> list[tuple[float, int]]:
        if seed is not None:
            torch.manual_seed(seed)
        return [(time.perf_counter(), chunk.shape[-1] // 1920) for chunk in model.generate_audio_stream(state, text)]

    thread_choices = sorted({1, threads})  # its own default (1) and ours: it gets the better one
    for prec in ("fp32", "int8"):
        model = load_reference(model_dir, quantize=prec == "int8")
        model.eos_threshold = NO_EOS
        state = model.get_state_for_audio_prompt(model_dir / "embeddings" / f"{VOICE}.safetensors")
        stream(model, state, SHORT_TEXT, 99)  # warm-up
        best: dict = {}
        for n_threads in thread_choices:
            torch.set_num_threads(n_threads)
            one = {"threads": n_threads}
            for name, text in (("short", SHORT_TEXT), ("long", LONG_TEXT)):
                runs = []
                for _ in range(REPEATS):
                    start = time.perf_counter()
                    runs.append(single(stream(model, state, text, 1), start))
                one[name] = best_of(runs)
            if not best or one["long"]["ms_per_frame"] < best["long"]["ms_per_frame"]:
                best = one
        out["single"][prec] = best
        if prec == precision:
            _reference_concurrency(out, model, state, stream, levels, best["threads"], copies_mb)
        out[f"rss_after_{prec}_mb"] = rss_mb()
        del model, state
    out["peak_rss_mb"] = rss_mb()
    return out


def _reference_concurrency(out: dict, model, state, stream, levels: list[int], threads: int,
                           copies_mb: float) -> None:
    import torch

    before = current_rss_mb()
    copies = [model, copy.deepcopy(model)]
    copy_mb = max(1.0, current_rss_mb() - before)
    out["copy_mb"] = copy_mb
    for n in levels:
        modes = {}
        torch.set_num_threads(threads)
        start = time.perf_counter()
        seq = [stream(model, state, STREAM_TEXT, 100 + i) for i in range(n)]
        modes[f"one-at-a-time, {threads}t"] = summarise(seq, start)
        if n > 1 and n * copy_mb <= copies_mb:
            while len(copies) < n:
                copies.append(copy.deepcopy(model))
            torch.set_num_threads(1)  # one core per stream thread
            modes["threads, 1t"] = summarise(*_in_threads(stream, copies[:n], state))
        elif n > 1:
            out["skipped"].append(f"threads mode at {n} streams: {n} model copies of {copy_mb:.0f} MB "
                                  f"exceed --ref-copies-mb {copies_mb:.0f}")
        mode, result = max(modes.items(), key=lambda kv: kv[1]["rtf"])
        out["concurrency"][str(n)] = {**result, "mode": mode,
                                      "all_modes_rtf": {k: v["rtf"] for k, v in modes.items()}}
    del copies


def _in_threads(stream, models: list, state) -> tuple[list, float]:
    """One reference stream per Python thread, each on its own model copy, started together."""
    results: list = [None] * len(models)
    barrier = threading.Barrier(len(models) + 1)

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = stream(models[i], state, STREAM_TEXT, None)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(len(models))]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    return results, start
