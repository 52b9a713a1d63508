"""Custom vocabulary: term recall with and without the client's terms, the word
errors of the other words, and what the terms cost the final, side by side.

    flock /work/wt/bench.lock python bench/vocabulary.py --sentences 6 --voices piper --conditions clean
    flock /work/wt/bench.lock python bench/vocabulary.py           # ~12 minutes on 2 cores

Starts a gateway (ASR only, default settings, tiny.en; ``--asr-model whisper-base``
for multilingual base, its streams asking for English) and, for every voice and
condition, streams one clip of everyday sentences (each holding a rare personal
name, a product or place name or a piece of jargon; 1 s between sentences, so
each is its own utterance) in real time over two /v1/dictation sockets at once:
one without terms, one with the whole term list (``terms=`` on connect, every
term of the set, as a user's list would hold many more terms than one sentence
says). Both streams carry the same audio at the same time, so they see the same
load.

Voices: ``piper`` (the bundled en_US joe voice, its random synthesis as is) and
``espeak`` (espeak-ng en-us, resampled by sox). Conditions: ``clean`` and
``noisy`` (white noise at 10 dB SNR).

Prints per voice and condition, and over all:
- term recall: the share of the sentences' terms found in their utterance's final
  (case and punctuation ignored; a term spelled as two words does not count);
- other words' WER: word errors on the words that are not terms (an error at a
  term's place, such as the extra word of "comfy UI", is the term's, not counted);
- end of speech -> final, p50 and p95: from when the sentence's last voiced
  sample was sent to when its final arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dictation_clips import voiced_bounds  # noqa: E402
from bench.processes import gateway_env, start_gateway  # noqa: E402
from engines.asr.models import TINY_EN_ID, WHISPER_BASE_ID, install_whisper_base  # noqa: E402
from gateway.client.dictation import DictationClient  # noqa: E402
from tests.support.speech import add_noise, espeak_say, piper_say, resample, silence  # noqa: E402

RATE = 16000
GAP_S = 1.0
NOISE_SNR_DB = 10.0
# (sentence, its terms): names, products, places and jargon tiny.en does not know
SENTENCES = (
    ("Please send the invoice to Siobhan before Friday.", ("Siobhan",)),
    ("I installed ComfyUI on the new laptop yesterday.", ("ComfyUI",)),
    ("We drove through Llanelli on the way to the coast.", ("Llanelli",)),
    ("Ask Okonkwo to join the meeting at noon.", ("Okonkwo",)),
    ("My cousin Anneliese moved to Szczecin last year.", ("Anneliese", "Szczecin")),
    ("Grigory bought a Zyxel router for the office.", ("Grigory", "Zyxel")),
    ("Tell Xiomara the report is ready.", ("Xiomara",)),
    ("We met Thandiwe at the cafe near Wroclaw.", ("Thandiwe", "Wroclaw")),
    ("The doctor prescribed metoprolol for her heart.", ("metoprolol",)),
    ("The dashboards in Grafana stopped updating this morning.", ("Grafana",)),
    ("Our team moved the database to Supabase last month.", ("Supabase",)),
    ("I can reach the home server through Tailscale now.", ("Tailscale",)),
    ("Aoife will bring the cake to the party.", ("Aoife",)),
    ("The flight to Ouagadougou leaves at nine.", ("Ouagadougou",)),
    ("Krzysztof fixed the bike in ten minutes.", ("Krzysztof",)),
    ("The nurse noted tachycardia after the long walk.", ("tachycardia",)),
    ("Make sure the retry handler is idempotent.", ("idempotent",)),
    ("Oluwaseun sent the photos from the wedding.", ("Oluwaseun",)),
    ("We stayed two nights in Machynlleth in the spring.", ("Machynlleth",)),
    ("The new build is deployed on Vercel.", ("Vercel",)),
    ("Eilidh and Tadhg are coming for dinner tonight.", ("Eilidh", "Tadhg")),
    ("Store the embeddings with pgvector in the same database.", ("pgvector",)),
    ("My sister works in Reykjavik at the harbour.", ("Reykjavik",)),
    ("The surgeon checked the anastomosis after the operation.", ("anastomosis",)),
)
TERMS = [term for _, terms in SENTENCES for term in terms]


@dataclass
class Clip:
    name: str
    audio: np.ndarray
    sentences: list[tuple[str, tuple[str, ...]]]
    ends_s: list[float]  # where each sentence's last voiced sample is
    starts: list[int]  # the sample where each sentence's audio (after the gap before it) starts


@dataclass
class Tally:
    terms: int = 0
    recalled: int = 0
    other_words: int = 0
    other_errors: int = 0
    latency_s: list[float] = field(default_factory=list)
    missed_finals: int = 0
    misses: list[str] = field(default_factory=list)  # "term: what the final says"
    heard: list[str] = field(default_factory=list)  # per sentence, its finals' text

    def add(self, other: Tally) -> None:
        self.terms += other.terms
        self.recalled += other.recalled
        self.other_words += other.other_words
        self.other_errors += other.other_errors
        self.latency_s += other.latency_s
        self.missed_finals += other.missed_finals
        self.misses += other.misses
        self.heard += other.heard


def say(text: str, voice: str) -> np.ndarray:
    if voice == "piper":
        samples, rate = piper_say(text)
        return resample(samples, rate)
    samples, rate = espeak_say(text)
    return resample(samples, rate)


def make_clip(voice: str, condition: str, sentences: list[tuple[str, tuple[str, ...]]], seed: int) -> Clip:
    parts, ends, starts, pos = [silence(0.5)], [], [], 0.5
    for text, _ in sentences:
        audio = say(text, voice)
        starts.append(round(pos * RATE))
        _, end = voiced_bounds(audio)
        ends.append(pos + end)
        parts += [audio, silence(GAP_S)]
        pos += len(audio) / RATE + GAP_S
    audio = np.concatenate([*parts, silence(1.0)])
    if condition == "noisy":
        audio = add_noise(audio, NOISE_SNR_DB, seed=seed)
    return Clip(f"{voice}/{condition}", audio, sentences, ends, starts)


def tokens(text: str) -> list[str]:
    return [t for t in re.sub(r"[^\w']+", " ", text.lower()).split() if t]


def recalled(term: str, text: str) -> bool:
    return f" {' '.join(tokens(term))} " in f" {' '.join(tokens(text))} "


def other_word_errors(reference: str, hypothesis: str, terms: tuple[str, ...]) -> tuple[int, int]:
    """(errors on the reference words that are not terms, how many such words): a
    word-level alignment; an inserted word is charged to a term beside it (the rest
    of a term written as two words), else to the reference word before it."""
    ref, hyp = tokens(reference), tokens(hypothesis)
    term_words = {w for term in terms for w in tokens(term)}
    rows = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(len(ref) + 1):
        for j in range(len(hyp) + 1):
            if i == 0 or j == 0:
                rows[i][j] = i + j
            else:
                rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]))
    charged = [0] * len(ref)
    is_term = [w in term_words for w in ref]
    i, j = len(ref), len(hyp)
    while i > 0 or j > 0:
        if i > 0 and j > 0 and rows[i][j] == rows[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            charged[i - 1] += ref[i - 1] != hyp[j - 1]
            i, j = i - 1, j - 1
        elif i > 0 and rows[i][j] == rows[i - 1][j] + 1:
            charged[i - 1] += 1
            i -= 1
        else:  # an insertion: a term's beside it (the rest of a split term), else the word before it
            before, after = max(0, i - 1), min(i, len(ref) - 1)
            charged[after if after < len(ref) and is_term[after] and not is_term[before] else before] += 1
            j -= 1
    others = [k for k, w in enumerate(ref) if not is_term[k]]
    return sum(charged[k] for k in others), len(others)


async def stream(url: str, clip: Clip, terms: list[str] | None, lists: list[list[str]] | None = None,
                 language: str | None = None) -> Tally:
    """Stream ``clip`` in real time; the tally of its finals against its sentences.
    ``terms``: on connect; ``lists``: one list per sentence, sent in a ``config``
    message just before that sentence's audio; ``language``: on connect."""
    sent: list[tuple[float, float]] = []
    finals: list[tuple[float, str, float]] = []  # (end, text, arrival)
    async with await DictationClient.connect(url, terms=terms, interim=True, language=language) as client:
        async def send() -> None:
            cuts = [0, *clip.starts[1:], len(clip.audio)] if lists else [0, len(clip.audio)]
            for n, (start, stop) in enumerate(itertools.pairwise(cuts)):
                if lists and n < len(lists):
                    await client.set_terms(lists[n])
                await client.stream_samples(clip.audio[start:stop], realtime=True,
                                            on_chunk_sent=lambda s, at=start: sent.append((at / RATE + s,
                                                                                           time.monotonic())))
            await client.end()

        sender = asyncio.create_task(send())
        async for event in client.events():
            if event["type"] == "final":
                finals.append((event["end"], event["text"], time.monotonic()))
        await sender
    tally = Tally()
    owner = [int(np.argmin([abs(end - e) for e in clip.ends_s])) for end, _, _ in finals]  # nearest sentence end
    for n, ((text, terms_said), end_s) in enumerate(zip(clip.sentences, clip.ends_s, strict=True)):
        mine = [f for f, o in zip(finals, owner, strict=True) if o == n]
        near = [f for f in mine if abs(f[0] - end_s) < 0.6]
        heard = " ".join(f[1] for f in mine)
        tally.heard.append(heard)
        tally.terms += len(terms_said)
        tally.recalled += sum(recalled(term, heard) for term in terms_said)
        tally.misses += [f"{term}: {heard}" for term in terms_said if not recalled(term, heard)]
        errors, count = other_word_errors(text, heard, terms_said)
        tally.other_errors += errors
        tally.other_words += count
        sent_at = next((wall for upto, wall in sent if upto >= end_s), None)
        if near and sent_at is not None:
            tally.latency_s.append(near[-1][2] - sent_at)
        else:
            tally.missed_finals += 1
    return tally


def row(label: str, without: Tally, with_terms: Tally) -> str:
    def cells(t: Tally) -> str:
        p50 = np.percentile(t.latency_s, 50) * 1000 if t.latency_s else float("nan")
        p95 = np.percentile(t.latency_s, 95) * 1000 if t.latency_s else float("nan")
        return (f"{t.recalled / max(1, t.terms):6.2f} {100 * t.other_errors / max(1, t.other_words):6.1f}% "
                f"{p50:6.0f} {p95:6.0f}")
    return f"{label:16} {cells(without)}   {cells(with_terms)}   {without.terms:4d} {without.other_words:5d}"


def short_lists(sentences: list[tuple[str, tuple[str, ...]]], size: int) -> list[list[str]]:
    """Per sentence: its own terms and others of the set, ``size`` in all (the others the
    next sentences' terms, so each list holds terms that are not said)."""
    pool = [term for _, ts in sentences for term in ts]
    lists = []
    for _, ts in sentences:
        others = [t for t in pool[pool.index(ts[-1]) + 1:] + pool if t not in ts]
        lists.append([*ts, *others[:max(0, size - len(ts))]])
    return lists


async def run(url: str, voices: list[str], conditions: list[str], count: int, list_size: int,
              dump: Path | None = None, language: str | None = None) -> None:
    sentences = list(SENTENCES[:count])
    terms = [term for _, ts in sentences for term in ts]
    lists = short_lists(sentences, list_size) if list_size else None
    if lists:
        terms = []
        print(f"{len(sentences)} sentences, a list of {list_size} terms before each (its own and others), e.g. "
              f"{', '.join(lists[0])}")
    else:
        print(f"{len(sentences)} sentences, {len(terms)} terms in the list: {', '.join(terms)}")
    print(f"{'':16} {'without terms':^28}   {'with terms':^28}")
    print(f"{'voice/condition':16} {'recall':>6} {'WER*':>7} {'p50ms':>6} {'p95ms':>6}   "
          f"{'recall':>6} {'WER*':>7} {'p50ms':>6} {'p95ms':>6}   terms words")
    total_without, total_with = Tally(), Tally()
    dumped: list[dict[str, object]] = []
    for seed, (voice, condition) in enumerate((v, c) for v in voices for c in conditions):
        clip = make_clip(voice, condition, sentences, seed)
        without, with_terms = await asyncio.gather(stream(url, clip, None, language=language),
                                                   stream(url, clip, terms or None, lists, language))
        total_without.add(without)
        total_with.add(with_terms)
        print(row(clip.name, without, with_terms), flush=True)
        dumped += [{"clip": clip.name, "sentence": text, "terms": list(ts), "without": a, "with": b}
                   for (text, ts), a, b in zip(sentences, without.heard, with_terms.heard, strict=True)]
    print(row("all", total_without, total_with))
    if dump is not None:
        dump.write_text(json.dumps(dumped, indent=1))
    print("terms missed with the list:", *total_with.misses, sep="\n  ")
    print("WER*: word errors of the words that are not terms. p50/p95: end of speech -> final, ms. "
          f"finals not matched to a sentence: {total_without.missed_finals} without, {total_with.missed_finals} with")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="use a running gateway instead of starting one")
    parser.add_argument("--voices", default="piper,espeak", help="piper and/or espeak")
    parser.add_argument("--conditions", default="clean,noisy", help="clean and/or noisy")
    parser.add_argument("--sentences", type=int, default=len(SENTENCES), help="how many of the sentences to use")
    parser.add_argument("--list-size", type=int, default=0,
                        help="instead of the whole list on connect, a config message before each sentence with a list "
                             "of this many terms: its own and others")
    parser.add_argument("--dump", type=Path, help="write every sentence's finals (without and with terms) here as JSON")
    parser.add_argument("--asr-model", default=TINY_EN_ID, choices=(TINY_EN_ID, WHISPER_BASE_ID),
                        help="the gateway's recognizer (default %(default)s); whisper-base is installed into the "
                             "benchmark's data dir and its streams ask for English")
    args = parser.parse_args()
    if args.url and args.asr_model != TINY_EN_ID:
        parser.error("--asr-model chooses the model of the gateway this benchmark starts; not with --url")
    proc = None
    url = args.url
    if url is None:
        import tempfile

        data_dir = Path(tempfile.mkdtemp(prefix="voxgate-bench-"))
        if args.asr_model == WHISPER_BASE_ID:
            install_whisper_base(data_dir)
        env = gateway_env({"VOXGATE_DATA_DIR": str(data_dir), "VOXGATE_ASR_MODEL": args.asr_model})
        proc, url = start_gateway(["--engines", "asr", "--log-level", "warning"], env, quiet_stdout=True)
    try:
        language = "en" if args.asr_model == WHISPER_BASE_ID else None
        asyncio.run(run(url, args.voices.split(","), args.conditions.split(","), args.sentences, args.list_size,
                        args.dump, language))
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
