"""Live dictation benchmark: accuracy, latency, CPU and capacity on this machine.

    python bench/dictation.py            # starts its own gateway (tiny.en), ~3-4 minutes

Speech is made at run time (Piper joe at three speeds, espeak-ng with three
voices; clean and with white noise at 10 dB SNR), each clip framed by silence,
and streamed through a real gateway socket in real time by the project's own
client (gateway.client.dictation, as ``voxgate transcribe`` does). It reports:

- WER of the streaming finals, and of the same model transcribing each whole
  clip offline (POST /v1/audio/transcriptions: VAD-filtered, beam 5);
- end of speech -> final (p50, p95), measured from the wall-clock moment the
  last voiced sample was sent;
- speech start -> first non-empty partial;
- CPU seconds of the sidecar per audio second, one stream at a time;
- concurrent real-time streams: for N streams at once, the p95 of the
  ``lag_s`` the server reports and the final latency; the largest N with p95
  lag under 1 s is what this machine sustains.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.audio import write_wav  # noqa: E402
from gateway.client.dictation import DictationClient  # noqa: E402
from tests.support.speech import (  # noqa: E402
    SENTENCES,
    add_noise,
    espeak_say,
    piper_say,
    resample,
    word_errors,
)

RATE = 16000
LEAD_S = 0.6
TRAIL_S = 1.6
VOICED_RMS = 0.01


@dataclass
class Clip:
    name: str
    text: str
    audio: np.ndarray  # 16 kHz, with the lead and trailing silence
    speech_start_s: float
    speech_end_s: float


@dataclass
class StreamResult:
    finals: list[str] = field(default_factory=list)
    final_latency_s: list[float] = field(default_factory=list)
    first_partial_s: float | None = None
    lags: list[float] = field(default_factory=list)


def voiced_bounds(audio: np.ndarray) -> tuple[float, float]:
    frame = RATE // 100
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    voiced = np.nonzero(rms > VOICED_RMS)[0]
    return voiced[0] * frame / RATE, (voiced[-1] + 1) * frame / RATE


def make_clips() -> list[Clip]:
    plan = []
    for i, text in enumerate(SENTENCES):
        if i < 4:
            plan.append(("piper", text, 1.0, None))
        elif i < 6:
            plan.append(("piper", text, 1.25, None))
        elif i < 8:
            plan.append(("piper", text, 0.85, None))
        elif i < 10:
            plan.append(("piper", text, 1.0, 10.0))
        elif i < 13:
            plan.append(("espeak", text, ("en-us", "en-gb", "en-us+f3")[i - 10], None))
        else:
            plan.append(("espeak", text, ("en-us", "en-gb", "en-us+f3")[i - 13], 10.0))
    clips = []
    for i, (engine, text, variant, snr) in enumerate(plan):
        if engine == "piper":
            samples, rate = piper_say(text, length_scale=variant)
            name = f"piper x{1 / variant:.2f}"
        else:
            samples, rate = espeak_say(text, voice=variant, words_per_minute=165)
            name = f"espeak {variant}"
        speech = resample(samples, rate)
        start, end = voiced_bounds(speech)
        audio = np.concatenate([np.zeros(int(LEAD_S * RATE), np.float32), speech,
                                np.zeros(int(TRAIL_S * RATE), np.float32)])
        if snr is not None:
            audio = add_noise(audio, snr, seed=i)
            name += f" {snr:.0f} dB"
        clips.append(Clip(name, text, audio, LEAD_S + start, LEAD_S + end))
    return clips


async def stream_clip(url: str, clip: Clip) -> StreamResult:
    result = StreamResult()
    sent_at: dict[str, float] = {}

    def on_sent(sent_s: float) -> None:
        if sent_s >= clip.speech_start_s and "start" not in sent_at:
            sent_at["start"] = time.monotonic()
        if sent_s >= clip.speech_end_s and "end" not in sent_at:
            sent_at["end"] = time.monotonic()

    async with await DictationClient.connect(url) as client:
        async def send() -> None:
            await client.stream_samples(clip.audio, realtime=True, on_chunk_sent=on_sent)
            await client.end()

        sender = asyncio.create_task(send())
        async for event in client.events():
            now = time.monotonic()
            if event["type"] == "partial":
                result.lags.append(event.get("lag_s", 0.0))
                if event["text"] and result.first_partial_s is None and "start" in sent_at:
                    result.first_partial_s = now - sent_at["start"]
            elif event["type"] == "final":
                result.finals.append(event["text"])
                if "end" in sent_at and event["end"] >= clip.speech_end_s - 0.5:
                    result.final_latency_s.append(now - sent_at["end"])
        await sender
    return result


def offline_text(url: str, clip: Clip) -> str:
    import httpx

    files = {"file": ("clip.wav", write_wav(clip.audio, RATE), "audio/wav")}
    r = httpx.post(url + "/v1/audio/transcriptions", files=files, data={"model": "whisper-1"}, timeout=120)
    r.raise_for_status()
    return r.json()["text"]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sidecar_pid(server_pid: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == server_pid and b"engines.asr" in cmd:
                return int(entry.name)
    raise RuntimeError("no ASR sidecar under the gateway process")


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def start_server(threads: int) -> tuple[subprocess.Popen, str]:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    env.update({"PYTHONPATH": str(ROOT), "VOXGATE_DATA_DIR": tempfile.mkdtemp(prefix="voxgate-bench-"),
                "VOXGATE_ASR_THREADS": str(threads), "VOXGATE_MAX_DICTATION_STREAMS": "64"})
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--port", str(port), "--engines", "asr",
                             "--log-level", "warning"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the gateway did not become healthy")


async def run(url: str, server_pid: int | None, levels: list[int], max_clips: int) -> str:
    clips = make_clips()[:max_clips]
    print(f"{len(clips)} clips, {sum(len(c.audio) for c in clips) / RATE:.0f} s of audio", file=sys.stderr)
    pid = sidecar_pid(server_pid) if server_pid else None
    rows, stream_err, offline_err, words_total = [], 0, 0, 0
    latencies, first_partials = [], []
    cpu_before, audio_s = cpu_seconds(pid) if pid else 0.0, 0.0
    for clip in clips:
        result = await stream_clip(url, clip)
        audio_s += len(clip.audio) / RATE
        errors, total = word_errors(clip.text, " ".join(result.finals))
        stream_err += errors
        words_total += total
        latencies += result.final_latency_s
        if result.first_partial_s is not None:
            first_partials.append(result.first_partial_s)
        rows.append((clip, errors / total, result))
    cpu_per_audio_s = (cpu_seconds(pid) - cpu_before) / audio_s if pid else float("nan")
    per_kind: dict[str, list[int]] = {}
    for clip, _, result in rows:
        off_errors, total = word_errors(clip.text, offline_text(url, clip))
        offline_err += off_errors
        kind = ("piper" if clip.name.startswith("piper") else "espeak") + (" noisy" if "dB" in clip.name else " clean")
        s_err, _ = word_errors(clip.text, " ".join(result.finals))
        acc = per_kind.setdefault(kind, [0, 0, 0])
        acc[0] += s_err
        acc[1] += off_errors
        acc[2] += total
        print(f"  {clip.name:22s} stream {s_err}/{total}  offline {off_errors}/{total}  "
              f"final {[round(x, 2) for x in result.final_latency_s]}  {' | '.join(result.finals)}", file=sys.stderr)

    capacity_rows = []
    long_clip = concat_clips(clips[:4])  # ~18 s, four utterances
    for n in levels:
        results = await asyncio.gather(*(stream_clip(url, long_clip) for _ in range(n)))
        lags = [lag for r in results for lag in r.lags]
        lat = [x for r in results for x in r.final_latency_s]
        errs = sum(word_errors(long_clip.text, " ".join(r.finals))[0] for r in results)
        words = n * len(long_clip.text.split())
        capacity_rows.append((n, pct(lags, 95), max(lags) if lags else float("nan"), pct(lat, 50), pct(lat, 95),
                              errs / words))
        print(f"  {n} streams: lag p95 {pct(lags, 95):.2f} s, final p50 {pct(lat, 50):.2f} s", file=sys.stderr)
    sustained = max([n for n, p95, *_ in capacity_rows if p95 < 1.0], default=0)
    shown = f"at least {sustained} (the most tried)" if sustained == max(levels) else str(sustained)

    stream_wer, offline_wer = stream_err / words_total, offline_err / words_total
    lines = [
        "| measure | value | target |",
        "|---|---|---|",
        f"| WER, streaming finals (all {len(clips)} clips) | {stream_wer:.1%} | at most 1.15x offline |",
        f"| WER, same model offline on each whole clip | {offline_wer:.1%} | |",
        f"| streaming / offline WER | {stream_wer / offline_wer if offline_wer else float('nan'):.2f}x | <= 1.15x |",
        f"| end of speech -> final, p50 | {pct(latencies, 50):.2f} s | < 0.8 s |",
        f"| end of speech -> final, p95 | {pct(latencies, 95):.2f} s | |",
        f"| speech start -> first non-empty partial, p50 | {pct(first_partials, 50):.2f} s | |",
        f"| speech start -> first non-empty partial, p95 | {pct(first_partials, 95):.2f} s | |",
        f"| sidecar CPU seconds per audio second (1 stream) | {cpu_per_audio_s:.2f} | |",
        f"| concurrent real-time streams with p95 lag < 1 s | {shown} | |",
        "",
        "| clips | streaming WER | offline WER | words |",
        "|---|---|---|---|",
    ]
    for kind, (s_err, o_err, total) in sorted(per_kind.items()):
        lines.append(f"| {kind} | {s_err / total:.1%} | {o_err / total:.1%} | {total} |")
    lines += ["", "| streams | lag p95 | lag max | final p50 | final p95 | WER |", "|---|---|---|---|---|---|"]
    for n, p95, mx, l50, l95, w in capacity_rows:
        lines.append(f"| {n} | {p95:.2f} s | {mx:.2f} s | {l50:.2f} s | {l95:.2f} s | {w:.1%} |")
    return "\n".join(lines)


def concat_clips(clips: list[Clip]) -> Clip:
    audio = np.concatenate([c.audio for c in clips])
    text = " ".join(c.text for c in clips)
    last = clips[-1]
    offset = sum(len(c.audio) for c in clips[:-1]) / RATE
    return Clip("concat", text, audio, clips[0].speech_start_s, offset + last.speech_end_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="use a running gateway instead of starting one (no CPU figure)")
    parser.add_argument("--threads", type=int, default=2, help="ASR threads of the gateway it starts")
    parser.add_argument("--levels", default="1,2,4,6", help="concurrent stream counts to try")
    parser.add_argument("--clips", type=int, default=len(SENTENCES), help="use only the first N clips (a smoke run)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    proc = None
    try:
        if args.url:
            url, pid = args.url, None
        else:
            proc, url = start_server(args.threads)
            pid = proc.pid
        started = time.monotonic()
        table = asyncio.run(run(url, pid, levels, args.clips))
        print(table)
        print(f"\n(ran in {time.monotonic() - started:.0f} s)", file=sys.stderr)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
