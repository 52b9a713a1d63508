"""Word errors of streaming-policy variants, side by side with offline decoding of the same audio.

    flock /tmp/voxgate-bench.lock python bench/asr_variants.py     # ~45 minutes on 2 cores
    python bench/asr_variants.py --variants now,final-window-full --sets short,short-noisy --diffs

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
- ``margin-8``, ``margin-30s``: 8 s of silence after a partial's audio on its
  encoder window instead of 7 s, or Whisper's full 30 s window (``margin=N``).
- ``final-margin-7``: 7 s of silence after a short-window final's audio
  instead of 12 s (``fmargin=7``).
- ``partials-in-pauses``: partials go on while the speaker pauses (``pauses=1``).
- ``final-window-full``: finals on Whisper's 30 s window, as file transcription
  decodes (VOXGATE_ASR_FINAL_WINDOW=full; ``window=full``), speculated from
  the first silent window as a short-window final is.
- ``full-late``: the same, speculated only once the turn has ended (160 ms of
  silence), as streams without eager do (``window=full+early=0``).
- ``dictation``: a dictation stream (no eager, 30 s-window finals:
  ``window=full+eager=0``); every other variant is an agent's stream (eager).
- ``context``: every decode of an agent's stream too conditioned on the last
  40 words of the stream's earlier finals, as dictation streams' decodes are by
  default and offline decoding conditions a window on the text before it
  (``ctx=40``: both kinds of stream; ``ctx=N`` sets another count, 0 none).
- ``crop-at-dispatch``: a final decodes whatever audio had arrived when it was
  dispatched (and a final taken after the close the utterance plus 400 ms),
  instead of the utterance up to 32 ms after its silence began (``tail=-1``;
  ``tail=MS`` sets another fixed tail for short-window finals, and holds the
  speculation until it has arrived). Here every decode runs at once, so this is the crop of an idle server; under load the old crop grew with the wait.

A variant can also be written as its settings, each a field of the policy's
``PolicyTuning`` (engines/asr/tuning.py) that the variant's streams are given:
``hold=NEWEST/EARLIER`` (``hold_back_words``/``hold_back_earlier_words``: words
held back at the end of the newest and the earlier agreeing hypotheses),
``spec=MS`` (``speculate_from_s``), ``margin=S`` (``short_window_margin_s``, the
partials'), ``fmargin=S`` (``final_margin_s``, the short-window finals'),
``pauses=0|1`` (``partials_in_pauses``), ``tail=MS`` (``final_tail_s``; -1: up
to the dispatch), ``window=short|full`` (the stream's final window, as
VOXGATE_ASR_FINAL_WINDOW gives it), ``early=0|1``
(``eager_full_window_speculates_early``) and ``eager=0|1`` (the stream's
``eager``; 1 unless given), e.g. ``hold=1/0+pauses=1``.

Sets: ``short`` is the short-sentence set of dictation_clips.py (20 single
Harvard sentences, one clause each, each said whole by Piper at three length
scales and by one espeak-ng voice: 80 clips, clean), ``short-noisy`` the same
at 10 dB SNR; ``quick`` is the quick-paced set of dictation_clips.py (20 sentences said
phrase by phrase with 0.12-0.36 s pauses inside, Piper at rates 1.0 and 1.25,
clean), ``quick-noisy`` the same with white noise at 10 dB SNR, ``bench`` the dictation benchmark's 64 clips (Piper and espeak-ng,
clean and at 10 dB SNR), ``real`` the real human recordings of
dictation_clips.py (JFK, LibriSpeech, LJSpeech passages; see bench/REAL_SPEECH.md;
the same audio in every rendition). Each rendition of a set is new audio (Piper's
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
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.dictation_clips as clips_module  # noqa: E402
from bench.dictation import cpu_model  # noqa: E402
from engines.asr.decoder import WhisperDecoder  # noqa: E402
from engines.asr.policy import DecodeJob, PolicyTuning, StreamOptions  # noqa: E402
from tests.support.policy_replay import decode_job, offline_text, stream_finals  # noqa: E402
from tests.support.speech import word_errors, words  # noqa: E402

ESPEAK_RATES = (165, 155, 175)  # words per minute, one per rendition
UNBOUNDED_TAIL_S = 1e6  # a final's audio runs to wherever the stream stood


def rendition(n: int) -> list[clips_module.Clip]:
    """The benchmark's clips, synthesized afresh; rendition 0 is what bench/dictation.py plays."""
    rate = ESPEAK_RATES[n % len(ESPEAK_RATES)]
    plan = clips_module.harvard_plan() + clips_module.passage_plan()
    return [clips_module.make_clip(texts, engine, variant, snr, gap, seed + 1000 * n, espeak_wpm=rate)
            for seed, (texts, engine, variant, snr, gap) in enumerate(plan)]


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


def stream(decoder: Timed, clip: clips_module.Clip, variant: Variant) -> str:
    """The finals of one clip streamed through the policy, every due decode run at once."""
    options = StreamOptions(eager=variant.eager, full_window_finals=variant.full_window)
    return " ".join(stream_finals(decoder.job, clip.audio, options, tuning=variant.tuning))


def offline(decoder: WhisperDecoder, clip: clips_module.Clip) -> str:
    return offline_text(decoder, clip.audio)


NAMED = {
    "now": "",
    "commit-before": "hold=1/0",
    "spec-160": "spec=160",
    "margin-8": "margin=8",
    "margin-30s": "margin=23",
    "final-margin-7": "fmargin=7",
    "partials-in-pauses": "pauses=1",
    "crop-at-dispatch": "tail=-1",
    "final-window-full": "window=full",
    "full-late": "window=full+early=0",
    "dictation": "window=full+eager=0",
    "context": "ctx=40",
}


@dataclass(frozen=True)
class Variant:
    tuning: PolicyTuning  # what the variant's streams are given
    full_window: bool  # finals on Whisper's 30 s window (a flag of the sidecar, per stream)
    eager: bool = True  # an agent's stream (eager=true); False: a dictation stream


def parse_variant(variant: str) -> Variant:
    """The tuning and final window of ``variant``: the defaults, then its settings in order."""
    tuning, full_window, eager = PolicyTuning(), False, True
    for setting in filter(None, NAMED.get(variant, variant).split("+")):
        key, _, value = setting.partition("=")
        try:
            if key == "hold":
                newest, _, earlier = value.partition("/")
                tuning = replace(tuning, hold_back_words=int(newest), hold_back_earlier_words=int(earlier or newest))
            elif key == "spec":
                tuning = replace(tuning, speculate_from_s=int(value) / 1000)
            elif key == "margin":
                tuning = replace(tuning, short_window_margin_s=int(value))
            elif key == "fmargin":
                tuning = replace(tuning, final_margin_s=int(value))
            elif key == "pauses" and value in ("0", "1"):
                tuning = replace(tuning, partials_in_pauses=value == "1")
            elif key == "window" and value in ("short", "full"):
                full_window = value == "full"
            elif key == "early" and value in ("0", "1"):
                tuning = replace(tuning, eager_full_window_speculates_early=value == "1")
            elif key == "ctx":  # both kinds of stream
                tuning = replace(tuning, context_words=int(value), agent_context_words=int(value))
            elif key == "eager" and value in ("0", "1"):
                eager = value == "1"
            elif key == "tail":  # a fixed tail longer than 32 ms also holds the speculation until it has arrived
                ms = int(value)
                tuning = replace(tuning, final_tail_s=UNBOUNDED_TAIL_S if ms < 0 else ms / 1000)
                if ms > 32:
                    tuning = replace(tuning, speculate_from_s=max(tuning.speculate_from_s, ms / 1000))
            else:
                raise SystemExit(f"unknown setting {setting!r} in variant {variant!r} (see --help)")
        except ValueError as exc:
            raise SystemExit(f"setting {setting!r} in variant {variant!r}: {exc}") from None
    return Variant(tuning, full_window, eager)


def clip_set(name: str, n: int) -> list[clips_module.Clip]:
    if name in ("quick", "quick-noisy"):
        return clips_module.make_quick_clips(rendition=n, snr=10.0 if name == "quick-noisy" else None)
    if name in ("short", "short-noisy"):
        return clips_module.make_short_clips(rendition=n, snr=10.0 if name == "short-noisy" else None)
    if name == "real":
        return clips_module.make_real_clips()  # recordings: the same audio in every rendition
    return rendition(n)


def voice(set_name: str, clip: clips_module.Clip) -> str:
    if set_name in ("quick", "quick-noisy", "real"):
        return set_name
    if set_name.startswith("short"):
        return f"{set_name} {'piper' if clip.name.startswith('short piper') else 'espeak-ng'}"
    return ("piper" if clip.name.startswith("piper") else "espeak-ng") + (" noisy" if "dB" in clip.name else " clean")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default=",".join(NAMED),
                        help="named variants or settings joined by +, comma-separated (see the module docstring)")
    parser.add_argument("--sets", default="short,short-noisy,quick,bench",
                        help="clip sets: short, short-noisy, quick, quick-noisy, bench, real (comma-separated)")
    parser.add_argument("--renditions", type=int, default=2, help="fresh syntheses of each clip set")
    parser.add_argument("--clips", type=int, default=None, help="only the first N clips of each set and rendition")
    parser.add_argument("--diffs", action="store_true", help="print the clips where streaming loses words")
    args = parser.parse_args()
    variants = args.variants.split(",")
    sets = args.sets.split(",")
    settings = {variant: parse_variant(variant) for variant in variants}  # a bad setting stops here, before decoding
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
                timed = Timed(decoder)
                for clip, off in zip(clips, offline_texts, strict=True):
                    heard = stream(timed, clip, settings[variant])
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
