"""Soak benchmark: does a real gateway leak memory, file descriptors, tasks or
threads over many sessions?

    flock /tmp/voxgate-bench.lock python bench/soak.py --clients 8 --minutes 6

It starts ``voxgate serve`` on 127.0.0.1 with a random-weight Pocket model
(engines.pocket.random_checkpoint, so no download) and the real ASR sidecar,
then runs ``--clients`` loops of mixed sessions for ``--minutes``:

- TTS: speak and read to the end; speak then cancel at the first frame; speak
  then drop the connection without a close frame; a slow reader that takes a
  frame every 0.3 s and then drops;
- dictation: 3 s of Piper speech then finalize and end; speech then an abrupt
  drop; speech, finalize, read the final, then a normal close.

After ``--warmup-minutes`` of the same mix it waits until no session is live
and reads the gateway's own gauges from ``/metrics`` (admin only: resident
memory, open fds, asyncio tasks, threads; the sidecar's memory); then it runs
``--minutes``, sampling them every 5 s, waits until idle again and reads them
once more. It prints both idle readings and each gauge's least-squares slope
per 100 sessions over the measured part, and how many sessions
``/v1/admin/sessions`` still lists. Target: flat, i.e. under 1 MB per 100
sessions, no fd, task or thread growth, and no session left.

``--hostile`` runs the hostile mix instead (bench/soak_hostile.py): the same
normal sessions and real-time dictation probes, first quiet and then beside
bombs and slow sockets, printing the probes' final latency and the gateway's
memory for both phases. Target: hostile p50 within 1.2x of quiet, memory flat.

    flock /tmp/voxgate-bench.lock python bench/soak.py --hostile --clients 4 --probes 2 --minutes 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# bench/wyoming.py would shadow the wyoming package the hostile mix uses: drop this
# script's own folder from the path (Python puts it first).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from bench import processes  # noqa: E402
from bench.processes import free_port, gateway_env  # noqa: E402
from tests.support.speech import SENTENCES, pcm16, piper_say, resample, silence  # noqa: E402

GAUGES = ("voxgate_process_resident_bytes", "voxgate_process_open_fds", "voxgate_asyncio_tasks",
          "voxgate_process_threads", "voxgate_asr_sidecar_resident_bytes")
TTS_TEXTS = ("Hello there.", "The soak test speaks a short sentence.", "One more, please.")
RECV_TIMEOUT_S = 60.0


@dataclass
class Tally:
    done: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str) -> None:
        self.done += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1

    def error(self, kind: str, exc: BaseException) -> None:
        key = f"{kind}: {type(exc).__name__}"
        self.errors[key] = self.errors.get(key, 0) + 1


def abort(ws: object) -> None:
    """Drop the TCP connection with no close frame, as a crashed client would."""
    transport = getattr(ws, "transport", None)
    if transport is not None:
        transport.abort()


async def recv_json_until(ws: object, kinds: set[str]) -> dict:
    while True:
        message = await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)  # type: ignore[attr-defined]
        if isinstance(message, str):
            event = json.loads(message)
            if event.get("type") in kinds:
                return event


# ---- TTS sessions


async def tts_session(url: str, kind: str, rng: random.Random) -> None:
    async with connect(url.replace("http", "ws") + "/v1/tts", max_queue=4 if kind == "slow" else 16) as ws:
        await recv_json_until(ws, {"ready"})
        await ws.send(json.dumps({"type": "speak", "text": rng.choice(TTS_TEXTS)}))
        if kind == "full":
            await recv_json_until(ws, {"end"})
            await ws.send(json.dumps({"type": "end"}))
            await recv_json_until(ws, {"closed"})
        elif kind == "cancel":
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)  # start
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)  # the first frame
            await ws.send(json.dumps({"type": "cancel"}))
            await recv_json_until(ws, {"cancelled"})
            await ws.send(json.dumps({"type": "end"}))
            await recv_json_until(ws, {"closed"})
        elif kind == "drop":
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
            abort(ws)
        elif kind == "slow":
            for _ in range(6):
                await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
                await asyncio.sleep(0.3)
            abort(ws)


# ---- dictation sessions


async def dictation_session(url: str, kind: str, speech: list[bytes], rng: random.Random) -> None:
    async with connect(url.replace("http", "ws") + "/v1/dictation") as ws:
        await recv_json_until(ws, {"ready"})
        audio = rng.choice(speech)
        for start in range(0, len(audio), 6400):  # 200 ms messages, as fast as they go (paced by the server)
            await ws.send(audio[start:start + 6400])
        if kind == "drop":
            abort(ws)
            return
        await ws.send(json.dumps({"type": "finalize", "id": "soak"}))
        await recv_json_until(ws, {"finalized"})  # after the finals of all the audio before it
        if kind == "end":
            await ws.send(json.dumps({"type": "end"}))
            await recv_json_until(ws, {"closed"})


# ---- the run


async def client_loop(url: str, until: float, speech: list[bytes], tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    kinds = [("tts", "full"), ("tts", "cancel"), ("tts", "drop"), ("tts", "slow"),
             ("dictation", "end"), ("dictation", "drop"), ("dictation", "close")]
    while time.monotonic() < until:
        family, kind = rng.choice(kinds)
        label = f"{family}/{kind}"
        try:
            if family == "tts":
                await tts_session(url, kind, rng)
            else:
                await dictation_session(url, kind, speech, rng)
        except (ConnectionClosed, OSError, asyncio.TimeoutError) as exc:
            tally.error(label, exc)
            await asyncio.sleep(1.0)  # e.g. over capacity: back off a little
        tally.count(label)


async def gauges(http: httpx.AsyncClient) -> dict[str, float]:
    text = (await http.get("/metrics")).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            values[name] = float(value)
    return {name: values.get(name, float("nan")) for name in GAUGES}


async def sampler(http: httpx.AsyncClient, tally: Tally, samples: list[tuple[int, dict[str, float]]],
                  stop: asyncio.Event, every_s: float, offset: int) -> None:
    while not stop.is_set():
        samples.append((tally.done - offset, await gauges(http)))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)


def slope_per_100(samples: list[tuple[int, dict[str, float]]], name: str) -> float:
    """Least-squares slope of ``name`` against the session count, per 100 sessions."""
    points = [(n, g[name]) for n, g in samples if not np.isnan(g[name])]
    if len(points) < 3 or points[-1][0] == points[0][0]:
        return float("nan")
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    return float(np.polyfit(x, y, 1)[0] * 100)


def make_speech() -> list[bytes]:
    clips = []
    for text in SENTENCES[:3]:
        audio, rate = piper_say(text)
        clip = np.concatenate([silence(0.4), resample(audio, rate), silence(1.0)])
        clips.append(pcm16(clip))
    return clips


def start_gateway(data_dir: Path, model_dir: Path, clients: int,
                  extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    room = str(clients + 2)
    env = gateway_env({"VOXGATE_DATA_DIR": str(data_dir), "VOXGATE_POCKET_DIR": str(model_dir),
                       "VOXGATE_ENGINES": "pocket,asr", "VOXGATE_MAX_TTS_SESSIONS": room,
                       "VOXGATE_MAX_DICTATION_STREAMS": room, "VOXGATE_MAX_TTS_SESSIONS_PER_CLIENT": room,
                       "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": room, "VOXGATE_LOG_LEVEL": "warning",
                       **(extra_env or {})})
    return processes.start_gateway(args, env, health_timeout_s=300)


def mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


async def settle(http: httpx.AsyncClient, tasks_before: float | None = None) -> int:
    """Wait until no session is live (drops are torn down in the background) and, given
    ``tasks_before``, until the task count is back there (closing handshakes of dropped
    connections time out on their own) or 60 s have passed; how many sessions are left."""
    left: list = []
    for _ in range(120):
        left = (await http.get("/v1/admin/sessions")).json()["sessions"]
        if not left:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(2.0)
    for _ in range(60 if tasks_before is not None else 0):
        if (await gauges(http))["voxgate_asyncio_tasks"] <= tasks_before:
            break
        await asyncio.sleep(1.0)
    return len(left)


async def run(url: str, clients: int, minutes: float, warmup_minutes: float, speech: list[bytes]) -> str:
    tally = Tally()
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        # Warm-up: every kind of session once or more, so caches, pools and lazy imports are in place.
        until = time.monotonic() + warmup_minutes * 60
        await asyncio.gather(*(client_loop(url, until, speech, tally, 1000 + seed) for seed in range(clients)))
        await settle(http)
        warmup, start = tally.done, await gauges(http)
        samples: list[tuple[int, dict[str, float]]] = [(0, start)]
        stop = asyncio.Event()
        watcher = asyncio.create_task(sampler(http, tally, samples, stop, every_s=5.0, offset=warmup))
        until = time.monotonic() + minutes * 60
        await asyncio.gather(*(client_loop(url, until, speech, tally, seed) for seed in range(clients)))
        stop.set()
        await watcher
        left = await settle(http, start["voxgate_asyncio_tasks"])
        end = await gauges(http)
        samples.append((tally.done - warmup, end))
    sessions = tally.done - warmup
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(tally.by_kind.items()))
    head = (f"{clients} clients, {warmup_minutes:g} min of warm-up ({warmup} sessions) then {minutes:g} min "
            f"({sessions} sessions); all sessions: {kinds}")
    lines = [
        head,
        "",
        "| gauge | idle after warm-up | idle at the end | slope per 100 sessions |",
        "|---|---|---|---|",
    ]
    for name in GAUGES:
        slope = slope_per_100(samples, name)
        if name.endswith("_bytes"):
            shown = (mib(start[name]), mib(end[name]), f"{slope / 2**20:+.2f} MiB")
        else:
            shown = (f"{start[name]:g}", f"{end[name]:g}", f"{slope:+.2f}")
        lines.append(f"| {name.removeprefix('voxgate_')} | {' | '.join(shown)} |")
    step = max(1, len(samples) // 8)
    trace = ", ".join(f"{n}: {g['voxgate_process_resident_bytes'] / 2**20:.0f}" for n, g in samples[::step])
    lines += ["", f"gateway memory (MiB) by sessions run: {trace}",
              f"/v1/admin/sessions once the clients stopped: {left} live"]
    if tally.errors:
        lines.append("client-side errors: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.errors.items())))
    return "\n".join(lines)


def hostile_run(data_dir: Path, speech: list[bytes], args: argparse.Namespace) -> tuple[subprocess.Popen, str, Any]:
    """The gateway as the hostile mix needs it (a key, 127.0.0.1 as trusted proxy,
    a Wyoming listener) and the coroutine that runs the mix."""
    from bench import soak_hostile

    wyoming_port = free_port()
    sessions = args.clients + args.probes + 4
    proc, url = start_gateway(
        data_dir, data_dir / "random-pocket", sessions,
        {"VOXGATE_API_KEY": soak_hostile.API_KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32"},
        ("--wyoming", f"tcp://127.0.0.1:{wyoming_port}"))

    async def normal(until: float, seed: int) -> None:
        await client_loop(url, until, speech, Tally(), seed)

    return proc, url, soak_hostile.run(url, args.clients, args.minutes, args.warmup_minutes, speech, wyoming_port,
                                       normal, args.probes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--warmup-minutes", type=float, default=1.0, help="sessions before the first measurement")
    parser.add_argument("--hostile", action="store_true",
                        help="a quiet phase, then the same with bombs and slow sockets (bench/soak_hostile.py)")
    parser.add_argument("--probes", type=int, default=2, help="--hostile: users timing real-time finals")
    args = parser.parse_args()
    from engines.pocket.random_checkpoint import make_random_model_dir

    load_before = os.getloadavg()[0]
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    with tempfile.TemporaryDirectory(prefix="voxgate-soak-") as tmp:
        data_dir = Path(tmp)
        print("making a random-weight Pocket model and Piper speech ...", file=sys.stderr)
        make_random_model_dir(data_dir / "random-pocket")
        speech = make_speech()
        if args.hostile:
            proc, url, report_run = hostile_run(data_dir, speech, args)
        else:
            proc, url = start_gateway(data_dir, data_dir / "random-pocket", args.clients)
            report_run = run(url, args.clients, args.minutes, args.warmup_minutes, speech)
        try:
            report = asyncio.run(report_run)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(f"CPU: {cpu} ({os.cpu_count()} logical cores), 1-min load before: {load_before:.2f}")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
