"""Codec benchmark: CPU cost of every format the gateway decodes and encodes,
and what WebM input adds to the end-of-speech -> final latency of live dictation.

    flock /tmp/voxgate-bench.lock python bench/codecs.py     # ~2 minutes; starts its own gateway

Speech is made at run time (Piper, three Harvard sentences). It reports:

- CPU per audio second, as a share of one core, of each live decoder exactly
  as a /v1/dictation session runs it (decode, then resample to 16 kHz), of
  each file decoder of /v1/audio/transcriptions, and of each TTS encoder as the
  routes run it (24 kHz engine frames of 80 ms: resample if needed, encode),
  each next to raw PCM measured in the same run;
- end of speech -> final through a real gateway (ASR sidecar, tiny.en) for the
  same clips streamed in real time as pcm_s16le (100 ms chunks) and as WebM/Opus
  (100 ms slices, as MediaRecorder sends them), alternating, and the difference.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.processes import gateway_env, start_gateway  # noqa: E402
from gateway.audio import Encoding, StreamResampler, encode, write_wav  # noqa: E402
from gateway.client.dictation import DictationClient  # noqa: E402
from gateway.codecs.decoders import stream_decoder  # noqa: E402
from gateway.codecs.files import decode_file  # noqa: E402
from gateway.codecs.formats import InputEncoding, OutputFormat  # noqa: E402
from gateway.codecs.g711 import alaw_encode, mulaw_encode  # noqa: E402
from gateway.codecs.webm import WebmReader  # noqa: E402
from gateway.tts.frames import FrameEncoder  # noqa: E402
from tests.support.media import ffmpeg_file, opus_packets  # noqa: E402
from tests.support.speech import SENTENCES, piper_say, resample  # noqa: E402

MIN_CPU_S = 1.0  # repeat a case until it has used this much CPU
LEAD_S, TRAIL_S = 0.6, 1.6
SLICE_S = 0.1


def speech_48k(sentences: tuple[str, ...]) -> np.ndarray:
    parts = []
    for text in sentences:
        samples, rate = piper_say(text)
        parts.append(resample(samples, rate, 48000))
    return np.concatenate(parts)


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def cpu_share(work: Callable[[], None], audio_s: float) -> float:
    """CPU seconds of this thread per audio second, repeated to ``MIN_CPU_S``."""
    work()  # warm up: imports, tables, codec contexts
    reps, used = 0, 0.0
    while used < MIN_CPU_S:
        start = time.thread_time()
        work()
        used += time.thread_time() - start
        reps += 1
    return used / (reps * audio_s)


def live_decode(encoding: InputEncoding, rate: int, messages: list[bytes]) -> Callable[[], None]:
    def work() -> None:
        decoder = stream_decoder(encoding, rate)
        resampler = StreamResampler(decoder.sample_rate, 16000)
        for message in messages:
            resampler.feed(decoder.feed(message))
        resampler.feed(decoder.finish())
        resampler.flush()
    return work


def tts_encode(fmt: OutputFormat, frames: list[np.ndarray]) -> Callable[[], None]:
    def work() -> None:
        encoder = FrameEncoder(24000, fmt.default_rate(24000), fmt)
        encoder.take_header()
        for frame in frames:
            encoder.feed(frame)
        encoder.finish()
    return work


def cpu_table(speech: np.ndarray) -> list[str]:
    audio_s = len(speech) / 48000
    s16k, s8k, s24k = resample(speech, 48000, 16000), resample(speech, 48000, 8000), resample(speech, 48000, 24000)
    live = {
        "pcm_s16le 16 kHz": live_decode(InputEncoding.PCM_S16LE, 16000, chunks(encode(s16k, Encoding.S16LE), 3200)),
        "mulaw 8 kHz": live_decode(InputEncoding.MULAW, 8000, chunks(mulaw_encode(s8k), 800)),
        "alaw 8 kHz": live_decode(InputEncoding.ALAW, 8000, chunks(alaw_encode(s8k), 800)),
        "opus packets 16 kHz": live_decode(InputEncoding.OPUS, 16000, opus_packets(s16k, 16000)),
        "webm (Opus 48 kHz)": live_decode(InputEncoding.WEBM, 48000,
                                          chunks(ffmpeg_file("webm", "libopus", speech, 48000), 1000)),
        "ogg (Opus 48 kHz)": live_decode(InputEncoding.OGG, 48000,
                                         chunks(ffmpeg_file("ogg", "libopus", speech, 48000), 1000)),
    }
    files = {
        "wav 16 kHz": write_wav(s16k, 16000),
        "flac 44.1 kHz": ffmpeg_file("flac", "flac", resample(speech, 48000, 44100), 44100),
        "mp3 24 kHz": ffmpeg_file("mp3", "libmp3lame", s24k, 24000),
        "m4a (AAC 44.1 kHz)": ffmpeg_file("ipod", "aac", resample(speech, 48000, 44100), 44100),
        "ogg (Opus 48 kHz)": ffmpeg_file("ogg", "libopus", speech, 48000),
        "webm (Opus 48 kHz)": ffmpeg_file("webm", "libopus", speech, 48000),
    }
    frames = [s24k[i:i + 1920] for i in range(0, len(s24k), 1920)]
    rows = ["| direction | format | CPU, % of one core | x PCM |", "|---|---|---|---|"]
    base = cpu_share(live["pcm_s16le 16 kHz"], audio_s)
    for name, work in live.items():
        share = cpu_share(work, audio_s)
        rows.append(f"| dictation in | {name} | {100 * share:.3f} | {share / base:.1f} |")
    base = None
    for name, data in files.items():
        share = cpu_share(lambda data=data: decode_file(data, 16000, 3600.0), audio_s)
        base = base or share
        rows.append(f"| transcription file | {name} | {100 * share:.3f} | {share / base:.1f} |")
    base = cpu_share(tts_encode(OutputFormat.PCM_S16LE, frames), audio_s)
    for fmt in (OutputFormat.PCM_S16LE, OutputFormat.WAV, OutputFormat.MULAW, OutputFormat.ALAW, OutputFormat.OPUS,
                OutputFormat.MP3, OutputFormat.AAC, OutputFormat.FLAC):
        share = cpu_share(tts_encode(fmt, frames), audio_s)
        rate = fmt.default_rate(24000) // 1000
        rows.append(f"| speech out | {fmt.value} {rate} kHz | {100 * share:.3f} | {share / base:.1f} |")
    return rows


# ---- end of speech -> final through a real gateway


def webm_slices(audio: np.ndarray) -> tuple[list[bytes], list[float]]:
    """``audio`` (48 kHz) as WebM/Opus cut into ``SLICE_S`` slices at block
    boundaries, as MediaRecorder's timeslice does: (slices, audio end time of each)."""
    data = ffmpeg_file("webm", "libopus", audio, 48000)
    reader, ends = WebmReader(), []
    for offset in range(len(data)):
        ends += [offset + 1 for item in reader.feed(data[offset:offset + 1]) if isinstance(item, bytes)]
    per_slice = round(SLICE_S / 0.02)
    cuts = ends[per_slice - 1::per_slice]
    if cuts[-1] != len(data):
        cuts.append(len(data))
    slices = [data[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]
    return slices, [min(len(audio) / 48000, (i + 1) * SLICE_S) for i in range(len(slices))]


def pcm_slices(audio: np.ndarray) -> tuple[list[bytes], list[float]]:
    pcm = encode(resample(audio, 48000, 16000), Encoding.S16LE)
    step = int(16000 * SLICE_S) * 2
    slices = chunks(pcm, step)
    return slices, [min(len(audio) / 48000, (i + 1) * SLICE_S) for i in range(len(slices))]


async def final_latency(url: str, encoding: InputEncoding, slices: list[bytes], times: list[float],
                        speech_end_s: float) -> float:
    """Seconds from sending the slice holding the end of speech to the final."""
    rate = None if encoding is InputEncoding.WEBM else 16000  # a webm stream names its own rate
    sent_end: list[float] = []
    async with await DictationClient.connect(url, sample_rate=rate, encoding=encoding,  # type: ignore[arg-type]
                                             interim=False) as client:
        async def send() -> None:
            started = time.monotonic()
            for data, end_s in zip(slices, times, strict=True):
                delay = started + end_s - time.monotonic()  # a slice leaves when its audio is recorded
                if delay > 0:
                    await asyncio.sleep(delay)
                await client.send_audio(data)
                if end_s >= speech_end_s and not sent_end:
                    sent_end.append(time.monotonic())
            await client.end()

        sender = asyncio.create_task(send())
        latency = float("nan")
        async for event in client.events():
            if event["type"] == "final" and sent_end and latency != latency:
                latency = time.monotonic() - sent_end[0]
        await sender
    return latency


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    return start_gateway(["--engines", "asr", "--log-level", "warning"],
                         gateway_env({"VOXGATE_DATA_DIR": tempfile.mkdtemp(prefix="voxgate-bench-"),
                                      "VOXGATE_ASR_THREADS": "2"}))


async def latency_rows(url: str, sentences: tuple[str, ...], rounds: int) -> list[str]:
    results: dict[InputEncoding, list[float]] = {InputEncoding.PCM_S16LE: [], InputEncoding.WEBM: []}
    for text in sentences:
        speech = speech_48k((text,))
        audio = np.concatenate([np.zeros(int(LEAD_S * 48000), np.float32), speech,
                                np.zeros(int(TRAIL_S * 48000), np.float32)])
        speech_end_s = LEAD_S + len(speech) / 48000
        cut = {InputEncoding.PCM_S16LE: pcm_slices(audio), InputEncoding.WEBM: webm_slices(audio)}
        for _ in range(rounds):
            for encoding in (InputEncoding.PCM_S16LE, InputEncoding.WEBM):
                slices, times = cut[encoding]
                results[encoding].append(await final_latency(url, encoding, slices, times, speech_end_s))
    pcm, webm = (np.array(results[e]) for e in (InputEncoding.PCM_S16LE, InputEncoding.WEBM))

    def row(name: str, values: np.ndarray, sign: str = "") -> str:
        return (f"| {name} | {1000 * np.median(values):{sign}.0f} | {1000 * np.percentile(values, 95):{sign}.0f} "
                f"| {len(values)} |")

    return ["| input | end of speech -> final, p50 (ms) | p95 (ms) | clips |", "|---|---|---|---|",
            row("pcm_s16le, 100 ms chunks", pcm), row("webm (Opus), 100 ms slices", webm),
            row("webm - pcm, paired", webm - pcm, "+")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="latency runs per clip and encoding")
    parser.add_argument("--no-gateway", action="store_true", help="CPU table only")
    args = parser.parse_args()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "?")
    print(f"CPU: {model}; load average {os.getloadavg()[0]:.2f}\n")
    print("\n".join(cpu_table(speech_48k(SENTENCES[:3]))))
    if args.no_gateway:
        return 0
    proc, url = start_server()
    try:
        print()
        print("\n".join(asyncio.run(latency_rows(url, SENTENCES[3:6], args.rounds))))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
