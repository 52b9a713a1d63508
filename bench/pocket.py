"""Pocket TTS: our engine vs the reference ``pocket-tts`` package, side by side, one run.

    python bench/pocket.py [--geometry NAME|all] [--levels 1,2,4,8,16,32] [--quick] [--rounds N]
                           [--model-dir DIR] [--threads N] [--precision int8|fp32]
                           [--decoder-precision fp32|bf16|int8] [--json FILE]

``--geometry`` names a released English config (``english``, the default,
``english_2026-04_24l``, ``english_drifting_26-09``, ``english_18m_2026-10``,
``english_7m_2026-10``, ``english_2m_2026-10``) or ``all`` (each in turn, then a
capacity table: model x streams -> every stream real time, aggregate RTF, both
sides; ``--table-from`` prints that table from earlier ``--json`` files, so the
geometries can be measured one at a time). The model directory is built with random weights by the reference itself
(``tests/engines/pocket/reference_runner.py build DIR GEOMETRY 0``: its config, a
sentencepiece model of 600 pieces for the 1024-wide models and 300 for the small
ones, two voices it cloned and exported), and both sides load those same files; a
directory built that way can be reused with ``--model-dir``. Each side runs in its
own subprocess with ``--threads`` torch threads (ours: pipelined, so the LM thread
and the Mimi thread get one each). Importing ``pocket_tts`` pins torch to one
thread, so it never shares a process with us.

What each utterance says (EOS is off on both sides, see below, so every utterance
runs to its length limit, ``ceil((tokens / 3 + 2) * 12.5)`` frames):
- single stream, fp32 and int8: a 5-word and a 16-word sentence (one chunk each);
  ms per frame in steady state (first to last frame, per frame after the first) of
  the 16-word one and time to first audio (request to first PCM) of both, best of 2
  runs each; ours through one long-lived scheduler, as in the gateway; the
  reference at 1 torch thread (its default) and at ``--threads``, the better kept;
- concurrency (``--precision``, int8 by default) at ``--levels`` (default 1, 2, 4,
  8, 16, 32; ``--quick``: 1, 2, 4; the 24-layer model stops at 16 unless
  ``--levels`` says otherwise): every stream says the 9-word ``STREAM_TEXT`` of
  ``bench/pocket_measure.py`` (67 to 75 frames, 5.4 to 6 s of audio, by geometry
  tokenizer), all requested at once: aggregate real-time factor (audio seconds /
  wall seconds), time to first frame per stream (mean, max), and whether every
  stream stayed real time (every frame arrives before it is due when playback
  starts 80 ms after that stream's first frame, and the stream's audio seconds
  divided by the seconds from request to its last frame is at least 1); the
  largest stream count with every stream real time. Ours: the batch scheduler.
  Reference: its best of one stream at a time (at its best single-stream thread
  count) and one Python thread per stream (own model copy, 1 torch thread each; run
  only while the copies fit in ``--ref-copies-mb``, 4096 by default);
- peak RSS of each process.

``--decoder-precision`` (fp32 by default) runs our Mimi decoder in bf16 or int8, as
``VOXGATE_POCKET_DECODER_PRECISION`` does in the gateway; the reference has no such
setting and always decodes in float32, so the table's header names the precision and
a figure measured that way is ours with the opt-in decoder, not the float32 parity path.

Equal work: with random weights EOS falls on a random frame, and the two sides seed
their noise differently, so left on, EOS would give them utterances of different
lengths. The bench turns EOS off on both sides (threshold ``NO_EOS``); the audio
seconds of each side are printed with the table.

The machine is shared and noisy, and a burst of other work lands on whichever side
runs at that moment. So the two sides alternate (ours, reference, ours, ...) for
``--rounds`` rounds (default 2), and each figure is each side's best round
(``bench/pocket_report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.pocket_report import best_round, capacity_table, render  # noqa: E402

RUNNER = REPO / "tests" / "engines" / "pocket" / "reference_runner.py"
GEOMETRIES = ("english", "english_2026-04_24l", "english_drifting_26-09", "english_18m_2026-10",
              "english_7m_2026-10", "english_2m_2026-10")
LEVELS = [1, 2, 4, 8, 16, 32]
QUICK_LEVELS = [1, 2, 4]
# The 24-layer model's reference runs one stream at a time at about 3 frames per
# 100 ms: its 32-stream level alone would take several minutes a round.
BOUNDED_LEVELS = {"english_2026-04_24l": [1, 2, 4, 8, 16]}
WORKER_TIMEOUT_S = 1800


def build_model_dir(dest: Path, geometry: str) -> None:
    print(f"building a random {geometry} model with the reference ...", file=sys.stderr, flush=True)
    proc = subprocess.run([sys.executable, str(RUNNER), "build", str(dest), geometry, "0"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"building {geometry} failed:\n{proc.stderr[-4000:]}")


def _worker(side: str, args: argparse.Namespace, model_dir: Path, levels: list[int]) -> dict:
    cmd = [sys.executable, __file__, "--worker", side, "--model-dir", str(model_dir), "--threads",
           str(args.threads), "--precision", args.precision, "--levels", ",".join(map(str, levels)),
           "--ref-copies-mb", str(args.ref_copies_mb), "--decoder-precision", args.decoder_precision]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed:\n{proc.stderr[-4000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def levels_for(geometry: str, args: argparse.Namespace) -> list[int]:
    if args.levels:
        return args.levels
    if args.quick:
        return QUICK_LEVELS
    return BOUNDED_LEVELS.get(geometry, LEVELS)


def measure_geometry(geometry: str, model_dir: Path, args: argparse.Namespace) -> dict:
    """Alternating rounds of both sides on one model directory; prints its table."""
    levels = levels_for(geometry, args)
    started = time.monotonic()
    rounds: dict[str, list[dict]] = {"ours": [], "reference": []}
    for k in range(1, args.rounds + 1):
        for side in ("ours", "reference"):
            print(f"{geometry}, round {k}/{args.rounds}: measuring {side} ...", file=sys.stderr, flush=True)
            rounds[side].append(_worker(side, args, model_dir, levels))
    ours, ref = best_round(rounds["ours"]), best_round(rounds["reference"])
    for side, runs in rounds.items():
        per_round = "; ".join(
            f"round {i}: int8 {r['single']['int8']['long']['ms_per_frame']:.1f} ms/frame, "
            + ", ".join(f"{n} streams RTF {c['rtf']:.2f}" for n, c in r["concurrency"].items())
            for i, r in enumerate(runs, 1))
        print(f"{geometry} {side}: {per_round}", file=sys.stderr)
    print(render(geometry, ours, ref, args.threads, args.precision, os.cpu_count() or 1, args.decoder_precision))
    print(f"\n({geometry} took {time.monotonic() - started:.0f} s)\n", flush=True)
    return {"ours": ours, "reference": ref, "rounds": rounds}


def parse_levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated stream counts, got {text!r}") from None
    if not levels or levels[0] < 1 or levels[-1] > 64:
        raise argparse.ArgumentTypeError(f"stream counts from 1 to 64, got {text!r}")
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--geometry", choices=[*GEOMETRIES, "all"], default="english")
    parser.add_argument("--levels", type=parse_levels, default=None,
                        help="stream counts for the concurrency table, e.g. 1,2,4,8,16,32")
    parser.add_argument("--quick", action="store_true", help="stream counts 1, 2, 4")
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="a model dir built by reference_runner.py build for --geometry, reused")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per side; best kept")
    parser.add_argument("--precision", choices=["int8", "fp32"], default="int8", help="for the concurrency table")
    parser.add_argument("--decoder-precision", choices=["fp32", "bf16", "int8"], default="fp32",
                        help="our Mimi decoder's arithmetic (the reference's is always fp32)")
    parser.add_argument("--ref-copies-mb", type=float, default=4096,
                        help="memory the reference's model copies (one per stream thread) may take")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results here")
    parser.add_argument("--table-from", type=Path, nargs="+", default=None, metavar="JSON",
                        help="print the capacity table of earlier --json files and exit")
    parser.add_argument("--worker", choices=["ours", "reference"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.table_from:
        merged = {g: r for path in args.table_from for g, r in json.loads(path.read_text()).items()}
        print(capacity_table(merged, args.precision))
        return 0
    if args.worker:
        from bench.pocket_measure import run_ours, run_reference

        levels = args.levels or []
        result = (run_ours(args.model_dir, args.threads, levels, args.precision, args.decoder_precision)
                  if args.worker == "ours" else
                  run_reference(args.model_dir, args.threads, levels, args.precision, args.ref_copies_mb))
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    if args.model_dir is not None and args.geometry == "all":
        parser.error("--model-dir holds one geometry; name it with --geometry")
    geometries = GEOMETRIES if args.geometry == "all" else (args.geometry,)
    started = time.monotonic()
    results: dict[str, dict] = {}
    for geometry in geometries:
        if args.model_dir is not None:
            results[geometry] = measure_geometry(geometry, args.model_dir, args)
            continue
        with tempfile.TemporaryDirectory(prefix="pocket-bench-") as tmp:
            model_dir = Path(tmp) / geometry
            build_model_dir(model_dir, geometry)
            results[geometry] = measure_geometry(geometry, model_dir, args)
    print(capacity_table(results, args.precision))
    print(f"\n(bench took {time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
