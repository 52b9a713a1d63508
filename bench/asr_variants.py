"""Word errors of streaming-policy variants, side by side with offline decoding of the same audio.

    flock /tmp/voxgate-bench.lock python bench/asr_variants.py     # ~25 minutes on 2 cores
    python bench/asr_variants.py --variants now,commit-before --sets quick --diffs

Each variant changes one rule of the streaming policy (or several, joined by
``+``), and runs the policy itself (VAD, partials, LocalAgreement, speculative
and closing finals) over the clip sets with every decode done at once when it
is due (the cadence of one stream on an idle server), once per variant, on the
same audio. Named variants:

- ``now``: the policy as it is.
- ``commit-before``: LocalAgreement commits every agreed word but the newest
  hypothesis's last (``hold=1/0``), instead of holding back ten words in each.
- ``spec-160``: the speculative final starts 160 ms into a silence instead of
  at its first silent VAD window (32 ms) (``spec=160``). On an idle server this
  is also what the early finals on idle lanes change: whether the speculation
  of a short pause runs before the pause has lasted 160 ms.
- ``margin-8``, ``margin-30s``: 8 s of silence after the utterance on the
  encoder window instead of 7 s, or Whisper's full 30 s window (``margin=N``).
- ``partials-in-pauses``: partials go on while the speaker pauses (``pauses=1``).
- ``final-window-full``: finals on Whisper's 30 s window, as file transcription
  decodes (VOXGATE_ASR_FINAL_WINDOW=full; ``window=full``).
- ``crop-at-dispatch``: a final decodes whatever audio had arrived when it was
  dispatched (and a final taken after the close the utterance plus 400 ms),
  instead of the utterance up to 32 ms after its silence began (``tail=-1``;
  ``tail=MS`` sets another fixed tail for short-window finals, and holds the
  speculation until it has arrived). Here every decode runs at once, so this is the crop of an idle server; under load the old crop grew with the wait.

A variant can also be written as its settings: ``hold=NEWEST/EARLIER`` (words
held back at the end of the newest and the earlier agreeing hypotheses),
``spec=MS``, ``margin=S``, ``pauses=0|1``, ``tail=MS`` (-1: up to the dispatch),
``window=short|full``, e.g. ``hold=1/0+pauses=1``.

Sets: ``quick`` is the quick-paced set of dictation_clips.py (20 sentences said
phrase by phrase with 0.12-0.36 s pauses inside, Piper at rates 1.0 and 1.25,
clean), ``quick-noisy`` the same with white noise at 10 dB SNR, ``bench`` the dictation benchmark's 64 clips (Piper and espeak-ng,
clean and at 10 dB SNR). Each rendition of a set is new audio (Piper's
synthesis is random, noise gets other seeds, espeak-ng another rate), so a
variant is judged on several draws. The same clips go through the
file-transcription path (30 s window) once, as the offline reference.
Prints word errors per variant and set, the finals that repeat themselves (a
four-word run heard twice that the sentence says once) and the decode seconds
(the cost); ``--diffs`` prints every clip whose streaming text has more errors
than its offline text, with both texts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.dictation_clips as clips_module  # noqa: E402
import engines.asr.agreement as agreement_module  # noqa: E402
import engines.asr.decoder as decoder_module  # noqa: E402
import engines.asr.policy as policy_module  # noqa: E402
from bench.dictation import cpu_model  # noqa: E402
from engines.asr.decoder import WhisperDecoder  # noqa: E402
from engines.asr.policy import DecodeJob, StreamOptions  # noqa: E402
from tests.support.policy_replay import decode_job, offline_text, stream_finals  # noqa: E402
from tests.support.speech import espeak_say, word_errors, words  # noqa: E402

ESPEAK_RATES = (165, 155, 175)
UNBOUNDED_TAIL = 10**9  # a final's audio runs to wherever the stream stood  # words per minute, one per rendition


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
    options = StreamOptions(eager=True, full_window_finals=FULL_WINDOW_FINALS[0])
    return " ".join(stream_finals(decoder.job, clip.audio, options))


def offline(decoder: WhisperDecoder, clip: clips_module.Clip) -> str:
    return offline_text(decoder, clip.audio)


NAMED = {
    "now": "",
    "commit-before": "hold=1/0",
    "spec-160": "spec=160",
    "margin-8": "margin=8",
    "margin-30s": "margin=23",
    "partials-in-pauses": "pauses=1",
    "crop-at-dispatch": "tail=-1",
    "final-window-full": "window=full",
}
FULL_WINDOW_FINALS = [False]  # the ``window`` setting: not a module constant, the sidecar takes it as a flag


def apply(variant: str, defaults: dict[str, object]) -> None:
    """Set the policy's module constants for ``variant`` (the defaults first)."""
    agreement_module.HOLD_BACK, agreement_module.HOLD_BACK_EARLIER = defaults["hold"]
    policy_module.SPECULATE_FROM_S = defaults["spec"]
    decoder_module.SHORT_WINDOW_MARGIN_S = defaults["margin"]
    policy_module.PARTIALS_IN_PAUSES = defaults["pauses"]
    policy_module.FINAL_TAIL = defaults["tail"]
    FULL_WINDOW_FINALS[0] = False
    spec = NAMED.get(variant, variant)
    for setting in filter(None, spec.split("+")):
        key, _, value = setting.partition("=")
        if key == "hold":
            newest, _, earlier = value.partition("/")
            agreement_module.HOLD_BACK, agreement_module.HOLD_BACK_EARLIER = int(newest), int(earlier or newest)
        elif key == "spec":
            policy_module.SPECULATE_FROM_S = int(value) / 1000
        elif key == "margin":
            decoder_module.SHORT_WINDOW_MARGIN_S = int(value)
        elif key == "pauses":
            policy_module.PARTIALS_IN_PAUSES = value == "1"
        elif key == "window" and value in ("short", "full"):
            FULL_WINDOW_FINALS[0] = value == "full"
        elif key == "tail":  # a fixed tail longer than 32 ms also holds the speculation until it has arrived
            policy_module.FINAL_TAIL = UNBOUNDED_TAIL if int(value) < 0 else int(value) * policy_module.RATE // 1000
            if int(value) > 32:
                policy_module.SPECULATE_FROM_S = max(policy_module.SPECULATE_FROM_S, int(value) / 1000)
        else:
            raise SystemExit(f"unknown setting {key!r} in variant {variant!r}")


def clip_set(name: str, n: int) -> list[clips_module.Clip]:
    if name in ("quick", "quick-noisy"):
        return clips_module.make_quick_clips(rendition=n, snr=10.0 if name == "quick-noisy" else None)
    return rendition(n)


def voice(set_name: str, clip: clips_module.Clip) -> str:
    if set_name.startswith("quick"):
        return set_name
    return ("piper" if clip.name.startswith("piper") else "espeak-ng") + (" noisy" if "dB" in clip.name else " clean")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(NAMED),
                        help="named variants or settings joined by +, comma-separated (see the module docstring)")
    parser.add_argument("--sets", default="quick,bench", help="clip sets: quick, quick-noisy, bench (comma-separated)")
    parser.add_argument("--renditions", type=int, default=2, help="fresh syntheses of each clip set")
    parser.add_argument("--clips", type=int, default=None, help="only the first N clips of each set and rendition")
    parser.add_argument("--diffs", action="store_true", help="print the clips where streaming loses words")
    args = parser.parse_args()
    variants = args.variants.split(",")
    sets = args.sets.split(",")
    defaults: dict[str, object] = {
        "hold": (agreement_module.HOLD_BACK, agreement_module.HOLD_BACK_EARLIER),
        "spec": policy_module.SPECULATE_FROM_S, "margin": decoder_module.SHORT_WINDOW_MARGIN_S,
        "pauses": policy_module.PARTIALS_IN_PAUSES, "tail": policy_module.FINAL_TAIL}
    for variant in variants:
        apply(variant, defaults)  # an unknown setting stops here, before any decoding
    from engines.asr.models import TINY_EN_ID, resolve_model

    model = resolve_model(TINY_EN_ID, ROOT)
    decoder = WhisperDecoder(model.source, threads=1)
    groups: list[str] = []
    errors: dict[tuple[str, str], int] = {}  # (variant or "offline", group) -> word errors
    words_in: dict[str, int] = {}
    loops = dict.fromkeys(variants, 0)
    speculative = dict.fromkeys(variants, 0)
    cost = dict.fromkeys(variants, 0.0)
    started = time.monotonic()
    for set_name in sets:
        for n in range(args.renditions):
            clips = clip_set(set_name, n)[:args.clips]
            offline_texts = [offline(decoder, c) for c in clips]
            for clip, text in zip(clips, offline_texts, strict=True):
                group = voice(set_name, clip)
                if group not in groups:
                    groups.append(group)
                words_in[group] = words_in.get(group, 0) + word_errors(clip.text, "")[1]
                errors["offline", group] = errors.get(("offline", group), 0) + word_errors(clip.text, text)[0]
            for variant in variants:
                apply(variant, defaults)
                timed = Timed(decoder)
                for clip, off in zip(clips, offline_texts, strict=True):
                    heard = stream(timed, clip)
                    count, off_count = word_errors(clip.text, heard)[0], word_errors(clip.text, off)[0]
                    key = (variant, voice(set_name, clip))
                    errors[key] = errors.get(key, 0) + count
                    loops[variant] += looped(clip.text, heard)
                    if args.diffs and count > off_count:
                        print(f"  [{variant}] {clip.name}, rendition {n + 1}: {count} errors, offline {off_count}\n"
                              f"      said     {clip.text}\n      streamed {heard}\n      offline  {off}",
                              file=sys.stderr)
                cost[variant] += timed.seconds
                speculative[variant] += timed.speculative
                print(f"  {set_name} rendition {n + 1}, {variant}: "
                      f"{sum(errors.get((variant, g), 0) for g in groups)} errors so far", file=sys.stderr)
    apply("now", defaults)
    heads = " | ".join(f"{g} ({words_in[g]} words)" for g in groups)
    print(f"| variant | {heads} | all | WER | / offline | looped finals | speculative decodes | decode seconds |")
    print("|---|" + "---|" * len(groups) + "---|---|---|---|---|---|")
    total_words = sum(words_in.values())
    offline_total = sum(errors["offline", g] for g in groups)
    for variant in ["offline", *variants]:
        per = " | ".join(str(errors[variant, g]) for g in groups)
        total = sum(errors[variant, g] for g in groups)
        ratio = f"{total / offline_total:.2f}x" if offline_total else "n/a"
        if variant == "offline":
            print(f"| offline, 30 s window | {per} | {total} | {total / total_words:.1%} | 1.00x | | | |")
        else:
            shown = variant if variant not in NAMED or not NAMED[variant] else f"{variant} ({NAMED[variant]})"
            print(f"| {shown} | {per} | {total} | {total / total_words:.1%} | {ratio} | {loops[variant]} "
                  f"| {speculative[variant]} | {cost[variant]:.0f} s |")
    print(f"\n{total_words} words in all ({args.renditions} renditions of {', '.join(sets)}); word errors per "
          f"group; CPU: {cpu_model()}; ran in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
