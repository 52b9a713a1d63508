"""Scale-out benchmark: what the load balancer and the shared auth store cost per
session, whether routing is right, and the streams sustained with 1 vs 2 replicas.

    flock /tmp/voxgate-bench.lock python bench/scale.py       # ~4 minutes

Everything runs on 127.0.0.1 and is started here: redis-server, three `voxgate
serve` replicas (engines asr and piper; server mode, an API key, the balancer's
X-Forwarded-For trusted) and two haproxy instances with the configuration of
docs/deployment.md: one over replica A, one over replicas A and B. Replica M
keeps its auth state in memory (the single-machine default), A and B share Redis.

1. Session setup, side by side in alternating rounds: what a browser does to
   open a socket (POST /v1/auth/ticket with the key, then the WebSocket
   /v1/dictation?ticket=... up to its `ready` event), timed per session:
   M direct | A direct (Redis) | haproxy -> A | haproxy -> A+B. The added cost of
   Redis and of the balancer is the difference of medians against M direct (the
   target: under 5 ms). Then sessions/s with 8 clients at once per set-up.
2. Routing through haproxy -> A+B: tickets minted through the balancer and
   redeemed through it, wherever each request lands (every one must open);
   sockets held open, counted on each replica (leastconn spreads them).
3. Sustained streams through haproxy with 1 vs 2 replicas: D dictation streams
   (Piper speech in real time, lag as the server reports it) plus T TTS streams
   (Piper engine, three sentences each; a stream is real time when its audio
   never ran dry after an 80 ms buffer). On this 2-core machine a second
   replica adds no cores: the point is that routing and Redis cost nothing
   visible, not more capacity.

The client is remote for the gateways: it sends X-Forwarded-For 198.51.100.x,
which a trusted proxy (itself, or haproxy's appended header) hands through.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.gateway_process import running_gateway  # noqa: E402
from tests.support.haproxy import running_haproxy  # noqa: E402
from tests.support.redis_server import running_redis  # noqa: E402
from tests.support.speech import SENTENCES, pcm16, piper_say, resample, silence  # noqa: E402

KEY = "bench-" + secrets.token_urlsafe(24)
CONCURRENCY = 8
RATE = 16000


def client_headers(n: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}", "X-Forwarded-For": f"198.51.100.{n % 250 + 1}"}


def ws_url(base: str, path: str) -> str:
    return base.replace("http://", "ws://", 1) + path


@dataclass
class Setup:
    name: str
    url: str
    times_ms: list[float] = field(default_factory=list)
    ticket_ms: list[float] = field(default_factory=list)
    failures: int = 0


async def one_session(http: httpx.AsyncClient, url: str, n: int) -> tuple[float, float]:
    """(ticket ms, whole setup ms) of one session: mint a ticket, open the socket, wait for ready."""
    started = time.perf_counter()
    r = await http.post(url + "/v1/auth/ticket", json={"path": "/v1/dictation"}, headers=client_headers(n))
    r.raise_for_status()
    minted = time.perf_counter()
    ticket = r.json()["ticket"]
    xff = {"X-Forwarded-For": client_headers(n)["X-Forwarded-For"]}
    async with connect(ws_url(url, f"/v1/dictation?ticket={ticket}"), additional_headers=xff,
                       open_timeout=10) as ws:
        ready = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if ready.get("type") != "ready":
            raise RuntimeError(f"no ready: {ready}")
        done = time.perf_counter()
        await ws.send(json.dumps({"type": "end"}))
        await asyncio.wait_for(ws.recv(), 10)  # closed
    return (minted - started) * 1000, (done - started) * 1000


async def setup_latency(setups: list[Setup], rounds: int, per_round: int) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for setup in setups:  # warm-up: connections, imports, first sidecar streams
            for n in range(5):
                await one_session(http, setup.url, n)
        n = 0
        for _ in range(rounds):
            for setup in setups:
                for _ in range(per_round):
                    n += 1
                    try:
                        ticket_ms, total_ms = await one_session(http, setup.url, n)
                    except Exception:
                        setup.failures += 1
                        continue
                    setup.ticket_ms.append(ticket_ms)
                    setup.times_ms.append(total_ms)


async def sessions_per_s(url: str, total: int) -> tuple[float, int]:
    done = failures = 0
    counter = iter(range(total))

    async def worker(http: httpx.AsyncClient) -> None:
        nonlocal done, failures
        for n in counter:
            try:
                await one_session(http, url, n)
                done += 1
            except Exception:
                failures += 1

    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=CONCURRENCY * 2)) as http:
        started = time.perf_counter()
        await asyncio.gather(*(worker(http) for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
    return done / elapsed, failures


async def routing(lb: str, replicas: dict[str, str], tickets: int, held: int) -> dict[str, object]:
    """Tickets minted and redeemed through the balancer; sockets held open, counted per replica."""
    opened = 0
    async with httpx.AsyncClient(timeout=10) as http:
        for n in range(tickets):
            try:
                await one_session(http, lb, n)
                opened += 1
            except Exception:
                pass
        sockets = []
        try:
            for n in range(held):
                r = await http.post(lb + "/v1/auth/ticket", json={"path": "/v1/dictation"}, headers=client_headers(n))
                ws = await connect(ws_url(lb, f"/v1/dictation?ticket={r.json()['ticket']}"),
                                   additional_headers={"X-Forwarded-For": client_headers(n)["X-Forwarded-For"]})
                await ws.recv()
                sockets.append(ws)
            counts = {}
            for name, url in replicas.items():  # direct: the admin listing of each replica
                listing = (await http.get(url + "/v1/admin/sessions", headers={"Authorization": f"Bearer {KEY}"})
                           ).json()["sessions"]
                counts[name] = sum(1 for s in listing if s["kind"] == "dictation")
        finally:
            for ws in sockets:
                await ws.close()
    return {"tickets": tickets, "opened": opened, "held": held, "per_replica": counts}


# ---- sustained streams


def dictation_audio(seconds: float) -> np.ndarray:
    parts: list[np.ndarray] = [silence(0.5)]
    i = 0
    while sum(len(p) for p in parts) < seconds * RATE:
        samples, rate = piper_say(SENTENCES[i % len(SENTENCES)])
        parts += [resample(samples, rate), silence(0.8)]
        i += 1
    return np.concatenate(parts)


async def dictation_stream(url: str, audio: np.ndarray, n: int) -> dict[str, object]:
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(url + "/v1/auth/ticket", json={"path": "/v1/dictation"}, headers=client_headers(n))
    ticket = r.json()["ticket"]
    lags: list[float] = []
    finals = 0
    async with connect(ws_url(url, f"/v1/dictation?ticket={ticket}"),
                       additional_headers={"X-Forwarded-For": client_headers(n)["X-Forwarded-For"]}) as ws:
        await ws.recv()

        async def send() -> None:
            step = RATE // 10
            started = time.monotonic()
            for i in range(0, len(audio), step):
                delay = started + i / RATE - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await ws.send(pcm16(audio[i:i + step]))
            await ws.send(json.dumps({"type": "end"}))

        sender = asyncio.create_task(send())
        async for raw in ws:
            event = json.loads(raw)
            if event["type"] in ("partial", "final") and "lag_s" in event:
                lags.append(event["lag_s"])
            if event["type"] == "final":
                finals += 1
            if event["type"] == "closed":
                break
        await sender
    return {"lags": lags, "finals": finals}


async def tts_stream(url: str, n: int) -> dict[str, float]:
    texts = [SENTENCES[(n + k) % len(SENTENCES)] for k in range(3)]
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(url + "/v1/auth/ticket", json={"path": "/v1/tts"}, headers=client_headers(n))
    ticket = r.json()["ticket"]
    arrivals: list[tuple[float, int]] = []
    async with connect(ws_url(url, f"/v1/tts?engine=piper&ticket={ticket}"),
                       additional_headers={"X-Forwarded-For": client_headers(n)["X-Forwarded-For"]}) as ws:
        ready = json.loads(await ws.recv())
        rate = ready["sample_rate"]
        sent = time.monotonic()
        for text in texts:
            await ws.send(json.dumps({"type": "speak", "text": text}))
        await ws.send(json.dumps({"type": "end"}))
        async for raw in ws:
            if isinstance(raw, bytes):
                arrivals.append((time.monotonic(), len(raw) // 2))
            elif json.loads(raw)["type"] == "closed":
                break
    # real time: once playing with 80 ms buffered, the audio never runs dry
    first = arrivals[0][0]
    play_start = first + 0.08
    have = 0.0
    underruns = 0
    for at, samples in arrivals:
        if at > play_start + have + 1e-3:
            underruns += 1
            play_start = at - have
        have += samples / rate
    wall = arrivals[-1][0] - sent
    return {"rtf": have / wall, "underruns": underruns, "ttfa_ms": (first - sent) * 1000}


async def sustained(url: str, dictation: int, tts: int, audio: np.ndarray) -> dict[str, object]:
    jobs = [dictation_stream(url, audio, n) for n in range(dictation)] + [tts_stream(url, 100 + n) for n in range(tts)]
    results = await asyncio.gather(*jobs)
    lags = [lag for r in results[:dictation] for lag in r["lags"]]  # type: ignore[union-attr]
    tts_results = results[dictation:]
    return {"lag_p95": float(np.percentile(lags, 95)) if lags else float("nan"),
            "lag_max": max(lags) if lags else float("nan"),
            "finals": [r["finals"] for r in results[:dictation]],
            "tts_min_rtf": min(r["rtf"] for r in tts_results) if tts_results else float("nan"),
            "tts_underruns": sum(r["underruns"] for r in tts_results),
            "tts_ttfa_p95_ms": float(np.percentile([r["ttfa_ms"] for r in tts_results], 95)) if tts_results else 0}


# ---- orchestration


def cpu_name() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (the ASR sidecar), in MB."""
    total = 0
    pids = [pid] + [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == pid]
    for each in pids:
        try:
            fields = dict(line.split(":", 1) for line in (Path("/proc") / str(each) / "status").read_text().splitlines())
            total += int(fields["VmRSS"].split()[0])
        except (OSError, KeyError, ValueError):
            pass
    return total / 1024


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def run(args: argparse.Namespace, urls: dict[str, str], replicas: dict[str, str], pids: dict[str, int]) -> None:
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores); load average before: {os.getloadavg()[0]:.2f}")
    setups = [Setup("M direct (memory)", urls["M"]), Setup("A direct (Redis)", urls["A"]),
              Setup("haproxy -> A (Redis)", urls["lb1"]), Setup("haproxy -> A+B (Redis)", urls["lb2"])]
    await setup_latency(setups, args.rounds, args.per_round)
    base = statistics.median(setups[0].times_ms)
    print("\n1. Session setup: ticket + socket to `ready` (ms), one at a time, alternating rounds")
    print("| set-up | sessions | p50 | p95 | ticket p50 | added vs M direct (p50) | failures |")
    print("|---|---|---|---|---|---|---|")
    for s in setups:
        p50 = statistics.median(s.times_ms)
        print(f"| {s.name} | {len(s.times_ms)} | {p50:.2f} | {pct(s.times_ms, 95):.2f} | "
              f"{statistics.median(s.ticket_ms):.2f} | {p50 - base:+.2f} | {s.failures} |")
    print(f"\nsessions/s with {CONCURRENCY} clients at once ({args.burst} sessions each):")
    print("| set-up | sessions/s | ratio to M direct | failures |")
    print("|---|---|---|---|")
    rates = []
    for s in setups:
        rate, failures = await sessions_per_s(s.url, args.burst)
        rates.append(rate)
        print(f"| {s.name} | {rate:.1f} | {rate / rates[0]:.2f} | {failures} |")

    print("\n2. Routing through haproxy -> A+B")
    result = await routing(urls["lb2"], {k: replicas[k] for k in ("A", "B")}, tickets=100, held=10)
    print(f"tickets minted and redeemed through the balancer: {result['opened']}/{result['tickets']} opened; "
          f"{result['held']} sockets held open per replica: {result['per_replica']}")

    print("\n3. Sustained streams through haproxy (Piper speech for dictation, Piper engine for TTS)")
    audio = dictation_audio(args.stream_s)
    print("| replicas | dictation + TTS streams | dictation lag p95 / max (s) | finals per stream | "
          "TTS slowest RTF | TTS underruns | TTS first audio p95 (ms) |")
    print("|---|---|---|---|---|---|---|")
    for dictation, tts in args.levels:
        for name, url in (("1", urls["lb1"]), ("2", urls["lb2"])):
            r = await sustained(url, dictation, tts, audio)
            print(f"| {name} | {dictation} + {tts} | {r['lag_p95']:.2f} / {r['lag_max']:.2f} | {r['finals']} | "
                  f"{r['tts_min_rtf']:.2f} | {r['tts_underruns']} | {r['tts_ttfa_p95_ms']:.0f} |")
    print("\nresident memory per replica, gateway + ASR sidecar (engines asr, piper): "
          + ", ".join(f"{name} {rss_mb(pid):.0f} MB" for name, pid in pids.items()))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def level(text: str) -> tuple[int, int]:
    dictation, tts = text.split("+")
    return int(dictation), int(tts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=40)
    parser.add_argument("--burst", type=int, default=200, help="sessions per set-up for sessions/s")
    parser.add_argument("--levels", type=level, nargs="+", default=[(2, 2), (4, 4)],
                        help="dictation+TTS streams, e.g. 2+2 4+4")
    parser.add_argument("--stream-s", type=float, default=15.0, help="seconds of speech per dictation stream")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="voxgate-scale-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        redis = stack.enter_context(running_redis(work / "redis"))
        common = {"VOXGATE_SERVER_MODE": "1", "VOXGATE_API_KEY": KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32",
                  "VOXGATE_ASR_THREADS": "1", "VOXGATE_PIPER_THREADS": "1", "VOXGATE_MAX_DICTATION_STREAMS": "32",
                  "VOXGATE_MAX_TTS_SESSIONS": "32", "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": "32",
                  "VOXGATE_MAX_TTS_SESSIONS_PER_CLIENT": "32", "VOXGATE_LOG_LEVEL": "warning"}
        shared = {**common, "VOXGATE_REDIS_URL": redis.url}
        processes = {
            "M": stack.enter_context(running_gateway(work / "m", "asr,piper", env=common)),
            "A": stack.enter_context(running_gateway(work / "a", "asr,piper", env=shared)),
            "B": stack.enter_context(running_gateway(work / "b", "asr,piper", env=shared)),
        }
        replicas = {name: gw.url for name, gw in processes.items()}
        pids = {name: gw.proc.pid for name, gw in processes.items()}
        port = {name: int(url.rsplit(":", 1)[1]) for name, url in replicas.items()}
        lb1 = stack.enter_context(running_haproxy(work / "lb1", [port["A"]])).url
        lb2 = stack.enter_context(running_haproxy(work / "lb2", [port["A"], port["B"]])).url
        asyncio.run(run(args, {**replicas, "lb1": lb1, "lb2": lb2}, replicas, pids))


if __name__ == "__main__":
    main()
