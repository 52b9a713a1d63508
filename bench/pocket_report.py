"""The tables of ``bench/pocket.py``: one geometry side by side, and the capacity table.

Each side's figures are its best round (noise only ever makes a run slower): the
lowest ms/frame and time to first audio, and per stream count the round with the
highest aggregate RTF (its first-frame times and real-time verdict with it).
"""

from __future__ import annotations

import copy


def best_round(runs: list[dict]) -> dict:
    """One side's best figures over its rounds."""
    best = copy.deepcopy(runs[0])
    for run in runs[1:]:
        for prec, single in run["single"].items():
            mine = best["single"][prec]
            if "long" in single and single["long"]["ms_per_frame"] < mine["long"]["ms_per_frame"]:
                mine["threads"] = single.get("threads", mine.get("threads"))
            for name, figures in single.items():
                if isinstance(figures, dict):
                    mine[name] = {**figures, "ttfa_ms": min(figures["ttfa_ms"], mine[name]["ttfa_ms"]),
                                  "ms_per_frame": min(figures["ms_per_frame"], mine[name]["ms_per_frame"])}
        for n, conc in run["concurrency"].items():
            if conc["rtf"] > best["concurrency"][n]["rtf"]:
                best["concurrency"][n] = conc
        best["peak_rss_mb"] = max(best["peak_rss_mb"], run["peak_rss_mb"])
    return best


def ratio(ours: float, ref: float, higher_is_better: bool) -> str:
    if not ours or not ref:
        return "-"
    return f"{(ours / ref if higher_is_better else ref / ours):.2f}x"


def largest_realtime(side: dict) -> int:
    """The largest measured stream count at which every stream was real time (0: none)."""
    ok = [int(n) for n, v in side["concurrency"].items() if v["realtime"]]
    return max(ok, default=0)


def render(geometry: str, ours: dict, ref: dict, threads: int, precision: str, cores: int,
           decoder_precision: str = "fp32") -> str:
    ref_threads = {p: ref["single"][p]["threads"] for p in ("fp32", "int8")}
    decoder = "" if decoder_precision == "fp32" else f" and a {decoder_precision} Mimi decoder"
    lines = [(f"Pocket TTS, {geometry} geometry (random weights), {cores} cores; ours with "
             f"{threads} torch thread(s){decoder}, reference at its best thread count (fp32: {ref_threads['fp32']}, "
             f"int8: {ref_threads['int8']})"), "",
             "Single stream                   | ours     | reference | speed-up",
             "--------------------------------|----------|-----------|---------"]
    for prec in ("fp32", "int8"):
        o, r = ours["single"][prec], ref["single"][prec]
        lines.append(f"{prec} ms/frame (16 words)        | {o['long']['ms_per_frame']:8.1f} | "
                     f"{r['long']['ms_per_frame']:9.1f} | "
                     f"{ratio(o['long']['ms_per_frame'], r['long']['ms_per_frame'], False)}")
        for name, words in (("short", 5), ("long", 16)):
            lines.append(f"{prec} first audio, {words:2d} words (ms) | {o[name]['ttfa_ms']:8.0f} | "
                         f"{r[name]['ttfa_ms']:9.0f} | {ratio(o[name]['ttfa_ms'], r[name]['ttfa_ms'], False)}")
    if "fp32_1_thread" in ours["single"]:
        for prec in ("fp32", "int8"):
            lines.append(f"ours {prec} ms/frame on 1 thread instead of {threads}: "
                         f"{ours['single'][prec + '_1_thread']['long']['ms_per_frame']:.1f}")
    lines += ["", f"Concurrency ({precision}); RTF = audio s / wall s, all streams requested at once",
              ("streams | ours RTF | ref RTF (best mode)            | ratio | ours TTFF mean/max ms | "
               "ref TTFF mean/max ms | real time ours/ref (slowest stream RTF) | audio s ours/ref"),
              ("--------|----------|--------------------------------|-------|-----------------------|"
               "---------------------|-----------------------------------------|-----------------")]
    for n, o in ours["concurrency"].items():
        r = ref["concurrency"].get(n)
        ref_rtf = f"{r['rtf']:5.2f} ({r['mode']})" if r else "-"
        ref_ttff = f"{r['ttff_mean_ms']:6.0f} / {r['ttff_max_ms']:6.0f}" if r else "-"
        ref_rt = (("yes" if r["realtime"] else "no") + f" ({r['slowest_stream_rtf']:.2f})") if r else "-"
        lines.append(f"{n:>7} | {o['rtf']:8.2f} | {ref_rtf:30} | {ratio(o['rtf'], r['rtf'], True) if r else '-':5} | "
                     f"{o['ttff_mean_ms']:8.0f} / {o['ttff_max_ms']:6.0f}     | {ref_ttff:19} | "
                     f"{'yes' if o['realtime'] else 'no'} ({o['slowest_stream_rtf']:.2f}) / {ref_rt:16} | "
                     f"{o['audio_s']:.1f} / {r['audio_s'] if r else float('nan'):.1f}")
    ours_n, ref_n = largest_realtime(ours), largest_realtime(ref)
    lines += ["", (f"Largest measured stream count with every stream real time: ours {ours_n or 'none'}, "
                   f"reference {ref_n or 'none'}, ratio {ratio(ours_n, ref_n, True)}"),
              (f"Peak RSS: ours {ours['peak_rss_mb']:.0f} MB, reference {ref['peak_rss_mb']:.0f} MB, "
               f"ratio {ratio(ours['peak_rss_mb'], ref['peak_rss_mb'], False)} (ours: the fp32 and the int8 "
               f"model one after the other; reference: also one model copy per stream thread, "
               f"{ref.get('copy_mb', 0):.0f} MB each)")]
    lines += [f"Reference: {note}" for note in ref.get("skipped", [])]
    return "\n".join(lines)


def capacity_table(results: dict[str, dict], precision: str) -> str:
    """Model x streams: every stream real time (yes/no) and the aggregate RTF, both sides."""
    sides = ("ours", "reference")
    levels = sorted({int(n) for r in results.values() for side in sides for n in r[side]["concurrency"]})
    head = " | ".join(f"{n:>15}" for n in levels)
    lines = [(f"Capacity ({precision}): per stream count, every stream real time? (aggregate RTF); "
             "ours / reference"),
             f"{'model':26} | side | {head} | largest real time",
             f"{'-' * 26}-|------|-" + "-|-".join("-" * 15 for _ in levels) + "-|------------------"]
    for geometry, sides in results.items():
        for label, key in (("ours", "ours"), ("ref", "reference")):
            side = sides[key]["concurrency"]
            cells = []
            for n in levels:
                c = side.get(str(n))
                cells.append(f"{('yes' if c['realtime'] else 'no'):>3} ({c['rtf']:6.2f})" if c else "-")
            largest = largest_realtime(sides[key])
            lines.append(f"{geometry if label == 'ours' else '':26} | {label:4} | "
                         + " | ".join(f"{c:>15}" for c in cells) + f" | {largest or 'none'}")
    return "\n".join(lines)
