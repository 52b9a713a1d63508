"""Interruptions benchmark: does ``text_spoken`` name the words actually played?

    flock /work/wt/bench.lock python bench/interruptions.py [--count 50] [--seed 1]

Starts one `voxgate serve --engines asr,piper` and, on one /v1/tts socket, speaks
``--count`` passages of three Harvard sentences. The client reads each passage's
whole audio, then sends ``cancel`` with ``played_ms`` at a random offset into it
(0.4 s to 6 s, at most the audio's length) and keeps ``text_spoken``: each passage
is synthesized once, so the audio measured is the audio the answer describes.

The words actually played, by forced alignment: the passage's whole audio goes
once to the gateway's own ASR (``/v1/audio/transcriptions``, tiny.en, verbose_json
with word timestamps); its words are aligned to the passage's words by word edit
distance, and a passage word takes the times of the ASR words matched to it (one
the ASR missed lies between its neighbours). A word is heard once its midpoint
has played, the rule ``text_spoken`` follows with the engine's own timing
(gateway/tts/spans.py). Printed: how far ``text_spoken``'s word count is from the
words heard at the offset (target: within 1 word), and the ASR's word errors on
the passage (the noise floor). Beside it, the older measure: the audio up to the
offset transcribed on its own and matched to the passage's nearest prefix, letter
by letter (a word the ASR splits in two does not move it).

Compute: the same interruptions on Piper in this process (no socket): frames the
stream yields after ``cancel()`` (target 0: it stops at the next frame; a sentence
already on a worker finishes there and is dropped, which this does not count).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import processes  # noqa: E402
from bench.processes import gateway_env  # noqa: E402
from gateway.audio import write_wav  # noqa: E402
from tests.support.speech import SENTENCES, heard_prefix, words  # noqa: E402
from tests.support.speech import word_errors as edit_errors  # noqa: E402

RATE = 22050  # Piper's own: no resampling in the measure


@dataclass(frozen=True)
class Timed:
    """One passage word (as ``text.split()`` cuts it) and its audio by the ASR, in seconds."""

    word: str
    start: float
    end: float
    matched: bool  # False: the ASR missed it, its times lie between its neighbours'

    @property
    def midpoint(self) -> float:
        return (self.start + self.end) / 2


@dataclass(frozen=True)
class Interruption:
    spoken: int  # words in text_spoken
    heard: int  # passage words whose midpoint played by the offset (the ASR's timestamps)
    prefix: int  # the older measure: words of the passage's prefix nearest the offset's own transcript
    passage_errors: int  # the ASR's word errors on the whole passage
    offset_s: float
    text: str
    timed: list[Timed]


def passages(count: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.sample(SENTENCES, 3)) for _ in range(count)]


def align(reference: list[str], hypothesis: list[str]) -> list[int | None]:
    """For each reference word, the hypothesis word edit distance pairs it with (None: deleted)."""
    rows = [list(range(len(hypothesis) + 1))]
    for i, r in enumerate(reference, 1):
        row = [i]
        for j, h in enumerate(hypothesis, 1):
            row.append(min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + (r != h)))
        rows.append(row)
    pairs: list[int | None] = [None] * len(reference)
    i, j = len(reference), len(hypothesis)
    while i and j:
        if rows[i][j] == rows[i - 1][j - 1] + (reference[i - 1] != hypothesis[j - 1]):
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif rows[i][j] == rows[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    return pairs


def time_words(text: str, asr_words: list[dict[str, Any]], duration_s: float) -> list[Timed]:
    """The passage's words with the times of the ASR words aligned to them (``duration_s``: its audio's)."""
    tokens = text.split()
    pieces = [(t, piece) for t, token in enumerate(tokens) for piece in words(token)]
    heard = [(w["start"], w["end"], piece) for w in asr_words for piece in words(w["word"])]
    pairs = align([p for _, p in pieces], [p for _, _, p in heard])
    spans: list[list[float]] = [[] for _ in tokens]
    for (token, _), pair in zip(pieces, pairs, strict=True):
        if pair is not None:
            spans[token] += [heard[pair][0], heard[pair][1]]
    out: list[Timed] = []
    for t, token in enumerate(tokens):
        if spans[t]:
            out.append(Timed(token, min(spans[t]), max(spans[t]), True))
            continue
        before = out[-1].end if out else 0.0
        after = next((min(s) for s in spans[t + 1:] if s), duration_s)
        out.append(Timed(token, before, max(before, after), False))
    return out


def heard_at(timed: list[Timed], offset_s: float) -> int:
    """Passage words heard by ``offset_s``: the prefix whose every midpoint has played."""
    count = 0
    for word in timed:
        if word.midpoint > offset_s:
            break
        count += 1
    return count


async def transcribe(http: Any, pcm: bytes, timestamps: bool) -> dict[str, Any]:
    samples = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    form: dict[str, Any] = {"language": "en"}
    if timestamps:
        form.update({"response_format": "verbose_json", "timestamp_granularities[]": "word"})
    response = await http.post("/v1/audio/transcriptions", data=form,
                               files={"file": ("played.wav", write_wav(samples, RATE), "audio/wav")})
    response.raise_for_status()
    return dict(response.json())


async def speak_whole(ws: Any, text: str, index: int) -> bytes:
    """Speak ``text`` and read all of its audio."""
    await ws.send(json.dumps({"type": "speak", "text": text, "id": f"p{index}"}))
    audio = b""
    while True:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, bytes):
            audio += message
        elif json.loads(message)["type"] == "end":
            return audio
        elif json.loads(message)["type"] == "error":
            raise RuntimeError(message)


async def cancel_at(ws: Any, played_ms: int) -> dict[str, Any]:
    await ws.send(json.dumps({"type": "cancel", "played_ms": played_ms}))
    while True:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, str) and json.loads(message)["type"] in ("cancelled", "error"):
            answer = dict(json.loads(message))
            if answer["type"] == "error":
                raise RuntimeError(message)
            return answer


async def interruptions(url: str, texts: list[str], offsets: list[int]) -> list[Interruption]:
    import httpx
    import websockets

    out = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http, \
            websockets.connect(url.replace("http://", "ws://") + f"/v1/tts?engine=piper&sample_rate={RATE}",
                               max_size=None) as ws:
        json.loads(await ws.recv())  # ready
        base_ms = 0
        for index, (text, offset) in enumerate(zip(texts, offsets, strict=True)):
            audio = await speak_whole(ws, text, index)
            offset = min(offset, len(audio) // 2 * 1000 // RATE)
            answer = await cancel_at(ws, base_ms + offset)
            assert answer["text_spoken"] + answer["text_remaining"] == text, answer
            base_ms = answer["played_ms"]
            whole = await transcribe(http, audio, timestamps=True)
            timed = time_words(text, whole["words"], len(audio) / 2 / RATE)
            prefix = await transcribe(http, audio[:offset * RATE // 1000 * 2], timestamps=False)
            out.append(Interruption(len(answer["text_spoken"].split()), heard_at(timed, offset / 1000),
                                    heard_prefix(text, prefix["text"]), edit_errors(text, whole["text"])[0],
                                    offset / 1000, text, timed))
    return out


async def compute_stops(texts: list[str], offsets: list[int]) -> list[int]:
    """Per interruption on an in-process Piper: the frames it yields after cancel."""
    from engines.piper.engine import PiperEngine

    engine = PiperEngine(threads=2)
    await engine.load()
    out = []
    try:
        for text, offset in zip(texts, offsets, strict=True):
            stream = engine.open_stream(text)
            frames = stream.frames()
            samples = 0
            async for frame in frames:
                samples += len(frame)
                if samples * 1000 >= offset * engine.info().sample_rate:
                    break
            stream.cancel()
            out.append(sum([1 async for _ in frames]))
    finally:
        await engine.close()
    return out



def stats(diffs: list[int]) -> tuple[str, str, str, str]:
    off = [abs(d) for d in diffs]
    within = sum(1 for d in off if d <= 1)
    return (f"{statistics.mean(off):.2f} words", f"{float(np.percentile(off, 95)):.0f} / {max(off)} words",
            f"{within}/{len(off)} ({100 * within / len(off):.0f} %)",
            f"{sum(d > 0 for d in diffs)} / {sum(d < 0 for d in diffs)}")


def misses(results: list[Interruption]) -> None:
    """Each interruption more than a word off: the words around the offset, by the ASR's times."""
    for n, r in enumerate(results):
        if abs(r.spoken - r.heard) <= 1:
            continue
        print(f"\n#{n} offset {r.offset_s:.3f} s: text_spoken {r.spoken} words, heard {r.heard}")
        low, high = max(0, min(r.spoken, r.heard) - 2), min(len(r.timed), max(r.spoken, r.heard) + 2)
        for k in range(low, high):
            w = r.timed[k]
            print(f"  {k:3d} {w.word:<14} {w.start:6.3f}-{w.end:6.3f} mid {w.midpoint:6.3f}"
                  f"{'' if w.matched else ' (ASR missed it)'}")


def report(results: list[Interruption], stops: list[int]) -> None:
    aligned = [r.spoken - r.heard for r in results]
    prefix = [r.spoken - r.prefix for r in results]
    print("text_spoken - heard (word timestamps), per interruption:", " ".join(f"{d:+d}" for d in aligned))
    print("text_spoken - heard (prefix transcript), per interruption:", " ".join(f"{d:+d}" for d in prefix))
    misses(results)
    print(f"\ninterruptions: {len(results)}")
    print("| text_spoken vs the words heard | word timestamps (midpoint played) | prefix transcript |")
    print("|---|---|---|")
    for name, a, b in zip(("mean", "p95 / max", "within 1 word (target)", "text_spoken longer / shorter"),
                          stats(aligned), stats(prefix), strict=True):
        print(f"| {name} | {a} | {b} |")
    words_total = sum(len(r.text.split()) for r in results)
    missed = sum(not w.matched for r in results for w in r.timed)
    print(f"\nthe ASR's word errors on the whole passages (noise floor): "
          f"{sum(r.passage_errors for r in results)} in {words_total} words; passage words it did not time: {missed}")
    print(f"frames Piper yielded after cancel() (in process, same offsets): max {max(stops)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = passages(args.count, rng)
    offsets = [rng.randint(400, 6000) for _ in texts]
    with tempfile.TemporaryDirectory(prefix="voxgate-bench-") as data:
        proc, url = processes.start_gateway(
            ["--host", "127.0.0.1", "--engines", "asr,piper"],
            gateway_env({"VOXGATE_DATA_DIR": data, "VOXGATE_TTS_ENGINE": "piper", "VOXGATE_ASR_THREADS": "2"}),
            health_timeout_s=180, quiet_stdout=True)
        try:
            results = asyncio.run(interruptions(url, texts, offsets))
        finally:
            proc.terminate()
            proc.wait(30)
    stops = asyncio.run(compute_stops(texts, offsets))
    report(results, stops)


if __name__ == "__main__":
    main()
