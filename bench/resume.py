"""Resume benchmark: how soon a resumed session talks again, and whether what
it gives is what an uncut session gives, for dictation and for TTS.

    flock /work/wt/bench.lock python bench/resume.py                    # both kinds, 1 and 8 streams, cuts of 0.5, 2 and 5 s and a stall
    flock /work/wt/bench.lock python bench/resume.py --kind tts --streams 1 --cuts 0.5   # well under a minute

Each kind starts its own gateway and puts a TCP relay
(tests/support/cut_relay.py) in front of it for every stream. Each level runs
once uncut, then once per cut: the relay closes its connections and refuses new
ones for the cut's length (``stall`` instead stops forwarding without a close;
the client notices by its ping).

Dictation (the ASR sidecar, tiny.en): each stream is two Piper sentences (noise
off, so the words are the same every run) streamed in real time by the
project's client with ``resume=True``; the path breaks 1.5 s into the audio
(mid-sentence). It prints, per level and cut:

- first event after the reconnect: from the resumed ``ready`` to the first
  event after it (the events missed while away come first), p50 and max;
- reconnect: from the cut's end (the relay carries again) to the resumed ``ready``;
- identical: streams whose finals are word for word those of the uncut run.

TTS: bench/resume_tts.py (the same figures, with the first audio frame after
the resumed ``ready``, and the whole PCM compared byte for byte).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.resume_tts import after_resume, run_tts  # noqa: E402
from gateway.client.dictation import DictationClient  # noqa: E402
from tests.e2e.gateway_process import running_gateway  # noqa: E402
from tests.support.cut_relay import CutRelay  # noqa: E402
from tests.support.speech import SENTENCES, piper_say, resample, silence, words  # noqa: E402

BREAK_AT_S = 1.5
PING_S = 1.0


@dataclass
class Run:
    finals: list[list[str]]
    resumes: int
    first_event_s: float | None  # resumed ready -> first event after it
    reconnect_s: float | None  # relay back -> resumed ready


def clip(index: int) -> np.ndarray:
    parts = [silence(0.5)]
    for text in (SENTENCES[(2 * index) % len(SENTENCES)], SENTENCES[(2 * index + 1) % len(SENTENCES)]):
        samples, rate = piper_say(text, steady=True)
        parts += [resample(samples, rate), silence(1.2)]
    return np.concatenate(parts)


async def one_stream(port: int, audio: np.ndarray, cut: str | None) -> Run:
    relay = CutRelay("127.0.0.1", port)
    await relay.start()

    def on_chunk_sent(sent_s: float) -> None:
        if cut is not None and sent_s >= BREAK_AT_S:
            relay.break_once(cut)

    try:
        client = await DictationClient.connect(relay.url, resume=True, ping_s=PING_S)
        events: list[tuple[float, dict]] = []
        async with client:
            async def send() -> None:
                await client.stream_samples(audio, realtime=True, on_chunk_sent=on_chunk_sent)
                await client.end()

            sender = asyncio.create_task(send())
            async for event in client.events():
                events.append((time.monotonic(), event))
            await sender
        mended = await relay.mended_at()
    finally:
        await relay.aclose()
    return Run([words(e["text"]) for _, e in events if e["type"] == "final"], client.resumes,
               *after_resume([at for at, _ in events], client.resumed_at, mended, cut))


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"


async def level(port: int, streams: int, cuts: list[str]) -> None:
    clips = [clip(i) for i in range(streams)]
    uncut = await asyncio.gather(*(one_stream(port, c, None) for c in clips))
    for cut in cuts:
        runs = await asyncio.gather(*(one_stream(port, c, cut) for c in clips))
        same = sum(r.finals == u.finals for r, u in zip(runs, uncut, strict=True))
        label = "stall" if cut == "stall" else f"cut {cut} s"
        print(f"{streams} stream(s), {label:9}: resumed {sum(r.resumes for r in runs)}/{streams}; "
              f"first event after reconnect {summary([r.first_event_s for r in runs if r.first_event_s is not None])}; "
              f"reconnect {summary([r.reconnect_s for r in runs if r.reconnect_s is not None])}; "
              f"identical finals {same}/{streams}", flush=True)
        for r, u in zip(runs, uncut, strict=True):
            if r.finals != u.finals:
                print(f"    uncut: {u.finals}\n    cut:   {r.finals}")


def run_dictation(levels: list[int], cuts: list[str]) -> None:
    env = {"VOXGATE_MAX_DICTATION_STREAMS": str(max(levels)), "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": str(max(levels)),
           "VOXGATE_RESUME_GRACE_S": "30"}
    with tempfile.TemporaryDirectory() as data, running_gateway(Path(data), "asr", env=env) as gw:
        port = int(gw.url.rsplit(":", 1)[1])
        for streams in levels:
            asyncio.run(level(port, streams, cuts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="dictation,tts", help="dictation, tts or both (default dictation,tts)")
    parser.add_argument("--streams", default="1,8", help="concurrent streams per level (default 1,8)")
    parser.add_argument("--cuts", default="0.5,2,5,stall", help="cut lengths in seconds, or stall (default 0.5,2,5,stall)")
    args = parser.parse_args()
    kinds = [k for k in args.kind.split(",") if k]
    if unknown := set(kinds) - {"dictation", "tts"}:
        parser.error(f"--kind: {', '.join(sorted(unknown))} is not dictation or tts")
    levels = [int(n) for n in args.streams.split(",") if n]
    cuts = [c for c in args.cuts.split(",") if c]
    for cut in cuts:
        if cut != "stall" and not (cut.replace(".", "", 1).isdigit() and 0 < float(cut) < 30):
            parser.error(f"--cuts: {cut} is not stall or a number of seconds above 0 and under the 30 s grace")
    if "dictation" in kinds:
        run_dictation(levels, cuts)
    if "tts" in kinds:
        run_tts(levels, cuts, summary)


if __name__ == "__main__":
    main()
