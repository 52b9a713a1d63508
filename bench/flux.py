"""Flux benchmark: end of speech -> EndOfTurn and -> EagerEndOfTurn, native vs /v2/listen.

    flock /work/wt/bench.lock python bench/flux.py [--rounds 2] [--sentences 4] [--streams 1,8] [--turn-model]

Starts one `voxgate serve --engines asr` (tiny.en) and streams the same clips, in
real time (20 ms a message), over the native socket (`/v1/dictation?eager=true&
silence_ms=350`: eager_final, turn_resumed, final) and over the Flux front
(`/v2/listen`, `eager_eot_threshold=0.5` and Flux's default `eot_threshold` 0.7,
which is the same 350 ms of silence), alternating within each round so load drifts
hit both alike, at each stream count (the streams start 0.37 s apart, as users do
not stop speaking together). A clip is several sentences, each followed by 1.5 s of
silence; end of speech is the last 20 ms block above -40 dBFS, from the audio.
Speech: Piper (neural TTS, its noise on) and espeak-ng (formant synthesis).

Printed per socket and stream count: end of speech -> EndOfTurn (final) and ->
the EagerEndOfTurn (eager_final) that stood, p50 / p95; the fraction of turns whose
EndOfTurn text equals the EagerEndOfTurn before it; EagerEndOfTurn and TurnResumed
per turn. Published anchors for end of speech -> final (Pipecat's stt-benchmark,
1000 samples, p50 / p95 / p99): Deepgram 247 / 298 / 326 ms, Soniox 249 / 281 / 310 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import processes  # noqa: E402
from bench.processes import gateway_env  # noqa: E402
from tests.support.speech import SENTENCES, espeak_say, pcm16, piper_say, resample, silence  # noqa: E402

CHUNK = 640  # 20 ms of 16-bit mono at 16 kHz
GAP_S = 1.5
STAGGER_S = 0.37
NATIVE = "/v1/dictation?sample_rate=16000&encoding=pcm_s16le&language=en&eager=true&silence_ms=350"
FLUX = "/v2/listen?model=flux-general-en&encoding=linear16&sample_rate=16000&eager_eot_threshold=0.5"
ANCHORS = "published (Pipecat stt-benchmark, p50 / p95 / p99): Deepgram 247 / 298 / 326 ms, Soniox 249 / 281 / 310 ms"


@dataclass
class Clip:
    pcm: bytes
    ends: list[float]  # end of speech of each sentence, seconds on the clip's clock


@dataclass
class Turn:
    eagers: list[tuple[float, str]] = field(default_factory=list)  # (arrival, text), in order
    resumed: int = 0
    end: tuple[float, str, float] | None = None  # (arrival, text, the recognizer's end of speech)
    trigger: str = ""  # the EndOfTurn's (Flux): model, timeout or manual
    standing: tuple[float, str] | None = None  # the eager end of turn no TurnResumed withdrew


def make_clip(voice: str, texts: tuple[str, ...]) -> Clip:
    parts, ends, at = [silence(0.5)], [], 0.5
    for text in texts:
        if voice == "piper":
            samples, rate = piper_say(text)
            speech = resample(samples, rate)
        else:
            speech, _ = espeak_say(text)
        voiced = [i for i in range(0, len(speech), 320) if np.sqrt(np.mean(speech[i:i + 320] ** 2)) > 0.01]
        ends.append(at + (voiced[-1] + 320) / 16000)
        parts += [speech, silence(GAP_S)]
        at += (len(speech) + GAP_S * 16000) / 16000
    return Clip(pcm16(np.concatenate(parts)), ends)


def on_message(kind: str, data: dict, now: float, turns: dict[int, Turn]) -> None:
    """Record one server message as the turn event it is."""
    if kind == "flux":
        if data.get("type") != "TurnInfo":
            return
        event, index, text, end = data["event"], data["turn_index"], data["transcript"], data["audio_window_end"]
        turns.setdefault(index, Turn()).trigger = data.get("trigger", "")
    else:
        names = {"eager_final": "EagerEndOfTurn", "turn_resumed": "TurnResumed", "final": "EndOfTurn"}
        if data.get("type") not in names:
            return
        event, index = names[data["type"]], data["utterance"]
        text, end = data.get("text", ""), data.get("end", 0.0)
    turn = turns.setdefault(index, Turn())
    if event == "EagerEndOfTurn":
        turn.eagers.append((now, text))
        turn.standing = (now, text)
    elif event == "TurnResumed":
        turn.resumed += 1
        turn.standing = None
    elif event == "EndOfTurn":
        turn.end = (now, text, float(end))


async def one_stream(url: str, kind: str, clip: Clip, delay_s: float) -> tuple[float, dict[int, Turn]]:
    """Stream ``clip`` in real time after ``delay_s``; the wall time its audio clock started, and its turns."""
    import websockets

    await asyncio.sleep(delay_s)
    turns: dict[int, Turn] = {}
    path = FLUX if kind == "flux" else NATIVE
    async with websockets.connect(url.replace("http://", "ws://") + path, max_size=None) as ws:
        async def read() -> None:
            async for raw in ws:
                if isinstance(raw, str):
                    on_message(kind, json.loads(raw), time.monotonic(), turns)

        reader = asyncio.create_task(read())
        t0 = time.monotonic()
        for i in range(0, len(clip.pcm), CHUNK):
            await ws.send(clip.pcm[i:i + CHUNK])
            await asyncio.sleep(max(0.0, t0 + (i + CHUNK) / 32000 - time.monotonic()))
        await ws.send(json.dumps({"type": "CloseStream"} if kind == "flux" else {"type": "end"}))
        await asyncio.wait_for(reader, 120)
    return t0, turns


@dataclass
class Tally:
    end_ms: list[float] = field(default_factory=list)
    eager_ms: list[float] = field(default_factory=list)
    turns: int = 0
    with_eager: int = 0
    same_text: int = 0
    eagers: int = 0
    resumed: int = 0
    by_model: list[float] = field(default_factory=list)  # end of speech -> EndOfTurn of the turns a model answer ended
    timeouts: int = 0  # turns the silence rule ended after the end-of-turn model heard them unfinished

    def add(self, t0: float, turns: dict[int, Turn], clip: Clip) -> None:
        for turn in turns.values():
            if turn.end is None or not turn.end[1]:
                continue
            arrival, text, recognized_end = turn.end
            speech_end = t0 + min(clip.ends, key=lambda e: abs(e - recognized_end))
            self.turns += 1
            self.end_ms.append((arrival - speech_end) * 1000)
            if turn.trigger == "timeout":
                self.timeouts += 1
            elif turn.trigger == "model":
                self.by_model.append(self.end_ms[-1])
            self.eagers += len(turn.eagers)
            self.resumed += turn.resumed
            if turn.standing is not None:
                self.with_eager += 1
                self.same_text += turn.standing[1] == text
                self.eager_ms.append((turn.standing[0] - speech_end) * 1000)


def p50_p95(values: list[float]) -> str:
    if not values:
        return "- | -"
    return f"{statistics.median(values):.0f} | {np.percentile(values, 95):.0f}"


async def run(url: str, rounds: int, sentences: int, stream_counts: list[int], voices: list[str],
              turn_model: bool = False) -> None:
    clips = {voice: make_clip(voice, SENTENCES[:sentences]) for voice in voices}
    tallies: dict[tuple[str, str, int], Tally] = {}
    print(f"start: {machine()}", flush=True)
    for _ in range(rounds):
        for voice, clip in clips.items():
            for count in stream_counts:
                for kind in ("native", "flux"):
                    began = time.monotonic()
                    results = await asyncio.gather(*(one_stream(url, kind, clip, i * STAGGER_S)
                                                     for i in range(count)))
                    print(f"  {voice} {kind} x{count}: {time.monotonic() - began:.0f} s", flush=True)
                    tally = tallies.setdefault((voice, kind, count), Tally())
                    for t0, turns in results:
                        tally.add(t0, turns, clip)
    print("\n| speech | socket | streams | turns | EndOfTurn p50 | p95 ms | EagerEndOfTurn p50 | p95 ms "
          "| EndOfTurn text = eager | eager per turn | resumed per turn |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for (voice, kind, count), t in tallies.items():
        same = f"{t.same_text}/{t.with_eager}" + (f" ({100 * t.same_text / t.with_eager:.0f}%)" if t.with_eager else "")
        socket = "/v2/listen" if kind == "flux" else "/v1/dictation"
        print(f"| {voice} | {socket} | {count} | {t.turns} | {p50_p95(t.end_ms)} | {p50_p95(t.eager_ms)} | {same} "
              f"| {t.eagers / max(1, t.turns):.2f} | {t.resumed / max(1, t.turns):.2f} |")
    if turn_model:
        print("\n/v2/listen with the end-of-turn model: turns it ended (EndOfTurn p50 / p95 ms of those), "
              "turns the silence rule ended after it heard them unfinished")
        for (voice, kind, count), t in tallies.items():
            if kind == "flux":
                print(f"  {voice} x{count}: {len(t.by_model)} of {t.turns} ({p50_p95(t.by_model)}); {t.timeouts}")
    print(f"\n{ANCHORS}\nend: {machine()}")


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    return f"{cpu}, {os.cpu_count()} cores, load average {', '.join(f'{v:.2f}' for v in os.getloadavg())}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=4)
    parser.add_argument("--streams", default="1,8", help="stream counts, comma-separated")
    parser.add_argument("--voices", default="piper,espeak", help="piper and/or espeak, comma-separated")
    parser.add_argument("--turn-model", action="store_true",
                        help="start the gateway with VOXGATE_ASR_TURN_MODEL=auto: /v2/listen's turns end by the "
                             "end-of-turn model (the native socket keeps the silence rule)")
    args = parser.parse_args()
    counts = [int(n) for n in args.streams.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        most = str(max(counts))
        settings = {"VOXGATE_DATA_DIR": str(Path(tmp) / "data"), "VOXGATE_ASR_THREADS": "2",
                    "VOXGATE_MAX_DICTATION_STREAMS": most, "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": most,
                    "VOXGATE_ASR_TURN_MODEL": "auto" if args.turn_model else "off"}
        print(f"/v2/listen turns end by {'the end-of-turn model or ' if args.turn_model else ''}350 ms of silence")
        proc, url = processes.start_gateway(["--host", "127.0.0.1", "--engines", "asr"], gateway_env(settings),
                                            health_timeout_s=180, quiet_stdout=True)
        try:
            asyncio.run(run(url, args.rounds, args.sentences, counts, args.voices.split(","), args.turn_model))
        finally:
            proc.terminate()
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
