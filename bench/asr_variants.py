"""Word errors of streaming-policy variants: the encoder margin and when the speculative final starts.

    flock /tmp/voxgate-bench.lock python bench/asr_variants.py     # ~20 minutes on 2 cores

Streaming decodes encode the utterance plus ``SHORT_WINDOW_MARGIN_S`` of silence
instead of Whisper's 30 s window (engines/asr/decoder.py): a shorter margin is a
cheaper decode, and it may cost words. The speculative final starts
``SPECULATE_FROM_S`` into a silence (engines/asr/policy.py): sooner is a result
ready sooner, and a decode wasted on every shorter pause. A variant is written
``MARGIN`` or ``MARGIN@MS`` (the speculative final starting MS into the
silence instead of the policy's default). This runs the streaming policy itself
(VAD, partials, LocalAgreement, speculative and closing finals) over the
dictation benchmark's 64 clips, with every decode done at once when it is due
(the cadence of one stream on an idle server), once per variant, on the same
audio, and counts the finals' word errors, for the Piper clips and the
espeak-ng clips apart, and the finals that repeat themselves (a run of four
words heard twice that the sentence says once: Whisper looping into the
silence after the speech). The same clips go through the file-transcription
path (30 s window) once, as the offline reference.

Each rendition of the clip set is new audio: Piper's synthesis is random, the
noise gets other seeds and espeak-ng another rate, so a variant is judged on
several renditions, not on one draw. One decoding thread, as a decode lane
runs. Prints word errors per variant and rendition, the total, and the decode
seconds (the cost) side by side.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.dictation_clips as clips_module  # noqa: E402
import engines.asr.decoder as decoder_module  # noqa: E402
import engines.asr.policy as policy_module  # noqa: E402
from bench.dictation import cpu_model  # noqa: E402
from engines.asr.decoder import WhisperDecoder  # noqa: E402
from engines.asr.policy import DecodeJob  # noqa: E402
from tests.support.policy_replay import decode_job, offline_text, stream_finals  # noqa: E402
from tests.support.speech import espeak_say, word_errors, words  # noqa: E402

ESPEAK_RATES = (165, 155, 175)  # words per minute, one per rendition


def rendition(n: int) -> list[clips_module.Clip]:
    """The benchmark's clips, synthesized afresh; rendition 0 is what bench/dictation.py plays."""
    rate = ESPEAK_RATES[n % len(ESPEAK_RATES)]

    def say(text: str, voice: str = "en-us", words_per_minute: int = 165):
        return espeak_say(text, voice=voice, words_per_minute=rate)

    original = clips_module.espeak_say
    clips_module.espeak_say = say
    try:
        plan = clips_module.harvard_plan() + clips_module.passage_plan()
        return [clips_module.make_clip(texts, engine, variant, snr, gap, seed + 1000 * n)
                for seed, (texts, engine, variant, snr, gap) in enumerate(plan)]
    finally:
        clips_module.espeak_say = original


class Timed:
    """Runs decodes, adding up their time and counting the speculative ones."""

    def __init__(self, decoder: WhisperDecoder) -> None:
        self.decoder = decoder
        self.seconds = 0.0
        self.speculative = 0

    def job(self, job: DecodeJob):
        started = time.perf_counter()
        self.speculative += job.kind == "final" and job.generation >= 0
        result = decode_job(self.decoder, job)
        self.seconds += time.perf_counter() - started
        return result


def looped(reference: str, heard: str) -> bool:
    """``heard`` has a four-word run twice that ``reference`` does not."""
    def repeated(text: str) -> set[tuple[str, ...]]:
        w = words(text)
        runs = [tuple(w[i:i + 4]) for i in range(len(w) - 3)]
        return {r for r in runs if runs.count(r) > 1}

    return bool(repeated(heard) - repeated(reference))


def stream(decoder: Timed, clip: clips_module.Clip) -> str:
    """The finals of one clip streamed through the policy, every due decode run at once."""
    return " ".join(stream_finals(decoder.job, clip.audio))


def offline(decoder: WhisperDecoder, clip: clips_module.Clip) -> str:
    return offline_text(decoder, clip.audio)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="8@160,8,6,5,4,3",
                        help="MARGIN (seconds of silence after the utterance) or MARGIN@MS (the speculative "
                             "final starting MS into a silence), comma-separated")
    parser.add_argument("--renditions", type=int, default=3, help="fresh syntheses of the clip set")
    parser.add_argument("--clips", type=int, default=None, help="only the first N clips of each rendition")
    args = parser.parse_args()
    variants = args.variants.split(",")
    default_start = policy_module.SPECULATE_FROM_S
    from engines.asr.models import TINY_EN_ID, resolve_model

    model = resolve_model(TINY_EN_ID, ROOT)
    decoder = WhisperDecoder(model.source, threads=1)
    errors = {m: [0] * args.renditions for m in variants}
    by_voice = {m: {"piper": 0, "espeak": 0} for m in variants}
    loops = dict.fromkeys(variants, 0)
    speculative = dict.fromkeys(variants, 0)
    cost = dict.fromkeys(variants, 0.0)
    offline_errors, words_in = [0] * args.renditions, {"piper": 0, "espeak": 0}
    started = time.monotonic()
    for n in range(args.renditions):
        clips = rendition(n)[:args.clips]
        for clip in clips:
            words_in[clip.name.split()[0]] += word_errors(clip.text, "")[1]
        offline_errors[n] = sum(word_errors(c.text, offline(decoder, c))[0] for c in clips)
        for variant in variants:
            seconds, _, start_ms = variant.partition("@")
            decoder_module.SHORT_WINDOW_MARGIN_S = int(seconds)
            policy_module.SPECULATE_FROM_S = int(start_ms) / 1000 if start_ms else default_start
            timed = Timed(decoder)
            for clip in clips:
                heard = stream(timed, clip)
                count = word_errors(clip.text, heard)[0]
                errors[variant][n] += count
                by_voice[variant][clip.name.split()[0]] += count
                loops[variant] += looped(clip.text, heard)
            cost[variant] += timed.seconds
            speculative[variant] += timed.speculative
            print(f"  rendition {n + 1}, variant {variant}: {errors[variant][n]} errors", file=sys.stderr)
    total_words = sum(words_in.values())
    heads = " | ".join(f"rendition {n + 1}" for n in range(args.renditions))
    print(f"| encoder margin | speculative final from | {heads} | total word errors | WER | Piper WER "
          "| espeak-ng WER | looped finals | speculative decodes | decode seconds |")
    print("|---|---|" + "---|" * args.renditions + "---|---|---|---|---|---|---|")
    for variant in variants:
        per = " | ".join(str(e) for e in errors[variant])
        total = sum(errors[variant])
        piper, espeak = (by_voice[variant][v] / max(1, words_in[v]) for v in ("piper", "espeak"))
        seconds, _, start_ms = variant.partition("@")
        start = f"{int(start_ms)} ms" if start_ms else f"{default_start * 1000:.0f} ms"
        print(f"| {seconds} s | {start} | {per} | {total} | {total / total_words:.1%} | {piper:.1%} | {espeak:.1%} "
              f"| {loops[variant]} | {speculative[variant]} | {cost[variant]:.0f} s |")
    per = " | ".join(str(e) for e in offline_errors)
    print(f"| offline, 30 s window | | {per} | {sum(offline_errors)} | {sum(offline_errors) / total_words:.1%} "
          "| | | | | |")
    print(f"\n{total_words} words in all ({args.renditions} renditions); CPU: {cpu_model()}; "
          f"ran in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
