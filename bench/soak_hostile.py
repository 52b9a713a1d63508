"""The hostile mix of the soak benchmark (``bench/soak.py --hostile``): bombs and
slow sockets among normal sessions, against a gateway that guards itself.

The gateway runs with an API key and trusts 127.0.0.1 as its proxy, so every
client here is a remote one through ``X-Forwarded-For`` (documentation
addresses: nothing is sent anywhere but 127.0.0.1). Normal users each have
an address of their own and the key; attackers have others, some with the key
(a careless or hostile consumer) and some with none.

A run has two measured phases of the same length after a warm-up: *quiet*
(the normal mix, and probes that stream a sentence at real time and time its
final from the end of speech) and *hostile* (the same, plus one loop of each
attack below). It prints each phase's final latency (p50, p95) and the ratio,
the gateway's resident memory (start, peak, end of each phase, idle at the end),
and what each attack was answered. Target: hostile p50 within 1.2x of quiet,
memory flat.

The attacks, each a loop bounded by the phase's length:

- dictation bombs (a consume key): Ogg and WebM messages of 2-byte Opus packets,
  1 MiB mu-law messages, Ogg pages whose packet never ends with a new serial each;
- a 16 MiB nested-JSON first message on the ElevenLabs socket, no credential;
- sockets that never finish their first message (no credential), 24 at a time;
- upload bombs on ``/v1/audio/transcriptions``: an M4A whose sample table claims
  2^30 samples a chunk, a MOV whose extra track is a 16000x16000 PNG;
- one key holding as many ElevenLabs multi-stream contexts as it is given;
- a Wyoming client pushing 300 s of speech at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import httpx
import numpy as np
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support import file_bombs, stream_bombs

API_KEY = "soak-hostile-key-0123456789abcdef"
RECV_TIMEOUT_S = 60.0
PENDING_SOCKETS = 24


def remote(n: int, *, key: bool = True) -> dict[str, str]:
    """Headers of remote user ``n`` behind the trusted proxy, with or without the key."""
    headers = {"X-Forwarded-For": f"198.51.100.{n % 250 + 1}"}
    if key:
        headers["Authorization"] = f"Bearer {API_KEY}"
    return headers


@dataclass
class Outcomes:
    """What each attack was answered (close codes, statuses, exception names)."""

    seen: dict[str, Counter[str]] = field(default_factory=dict)

    def note(self, attack: str, outcome: str) -> None:
        self.seen.setdefault(attack, Counter())[outcome] += 1

    def lines(self) -> list[str]:
        return [f"- {attack}: " + ", ".join(f"{k} x{v}" for k, v in counts.most_common())
                for attack, counts in sorted(self.seen.items())]


ADMIN = {"X-Forwarded-For": "127.0.0.1"}  # /metrics is admin: a client on this machine, as the trusted proxy names it


def ws_url(url: str, path: str) -> str:
    return url.replace("http", "ws", 1) + path


async def read_to_close(ws: object) -> str:
    """Read until the server closes; the close code and reason."""
    with contextlib.suppress(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)  # type: ignore[attr-defined]
    code = getattr(ws, "close_code", None)
    reason = (getattr(ws, "close_reason", "") or "")[:60]
    return f"close {code} {reason}".strip()


async def send_then_read(ws: object, messages: list[bytes]) -> str:
    for message in messages:
        await ws.send(message)  # type: ignore[attr-defined]
    return await read_to_close(ws)


# ---- normal users: a sentence streamed at real time, its final timed


async def timed_final(url: str, clip: bytes, speech_end_s: float, user: int) -> float:
    """Stream ``clip`` (16 kHz s16) in 100 ms messages at real time; seconds from
    the moment its speech ended (``speech_end_s`` into the clip) to its first final."""
    async with connect(ws_url(url, "/v1/dictation"), additional_headers=remote(user)) as ws:
        while json.loads(await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S))["type"] != "ready":
            pass
        final: asyncio.Future[float] = asyncio.get_running_loop().create_future()

        async def reader() -> None:
            while True:
                message = await asyncio.wait_for(ws.recv(), RECV_TIMEOUT_S)
                if isinstance(message, str) and json.loads(message)["type"] == "final" and not final.done():
                    final.set_result(time.monotonic())

        reading = asyncio.create_task(reader())
        started = time.monotonic()
        step = 3200
        try:
            for i, offset in enumerate(range(0, len(clip), step)):
                await ws.send(clip[offset:offset + step])
                await asyncio.sleep(max(0.0, started + (i + 1) * 0.1 - time.monotonic()))
            arrived = await asyncio.wait_for(final, RECV_TIMEOUT_S)
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reading
        return arrived - (started + speech_end_s)


async def probe_loop(url: str, until: float, clips: list[tuple[bytes, float]], user: int,
                     latencies: list[float], failures: Counter[str]) -> None:
    i = 0
    while time.monotonic() < until:
        clip, speech_end_s = clips[i % len(clips)]
        i += 1
        try:
            latencies.append(await timed_final(url, clip, speech_end_s, user))
        except (ConnectionClosed, OSError, asyncio.TimeoutError, KeyError) as exc:
            failures[type(exc).__name__] += 1
            await asyncio.sleep(1.0)


# ---- the attacks


Attack = Callable[[str, float, Outcomes], Awaitable[None]]


def dictation_bomb(name: str, query: str, messages: Callable[[], list[bytes]], user: int) -> Attack:
    async def attack(url: str, until: float, outcomes: Outcomes) -> None:
        payload = messages()
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                # no client pings: a socket paced to real time is not read, so they would go unanswered
                async with connect(ws_url(url, "/v1/dictation?" + query), additional_headers=remote(user),
                                   max_size=None, ping_interval=None, compression=None) as ws:
                    outcome = await asyncio.wait_for(send_then_read(ws, payload), max(1.0, until - time.monotonic()))
            except asyncio.TimeoutError:
                outcome = f"still paced when the phase ended ({time.monotonic() - started:.0f} s)"
            except (ConnectionClosed, OSError) as exc:
                outcome = type(exc).__name__
            outcomes.note(name, outcome)
            await asyncio.sleep(0.5)

    return attack


async def preauth_json(url: str, until: float, outcomes: Outcomes) -> None:
    depth = 8 * 1024 * 1024 - 64
    message = "[" * depth + "]" * depth  # 16 MiB of nesting, no credential
    path = "/v1/text-to-speech/alba/stream-input?output_format=pcm_24000"
    while time.monotonic() < until:
        try:
            async with connect(ws_url(url, path), additional_headers=remote(201, key=False), max_size=None,
                               compression=None) as ws:
                await ws.send(message)
                outcome = await asyncio.wait_for(read_to_close(ws), RECV_TIMEOUT_S)
        except (ConnectionClosed, OSError, asyncio.TimeoutError) as exc:
            outcome = type(exc).__name__
        outcomes.note("elevenlabs 16 MiB nested JSON, no key", outcome)
        await asyncio.sleep(1.0)


async def pending_sockets(url: str, until: float, outcomes: Outcomes) -> None:
    path = "/v1/text-to-speech/alba/stream-input?output_format=pcm_24000"

    async def one(n: int) -> str:
        try:
            async with connect(ws_url(url, path), additional_headers=remote(210, key=False)) as ws:
                return await asyncio.wait_for(read_to_close(ws), RECV_TIMEOUT_S)  # sends nothing
        except Exception as exc:  # a refused upgrade is the expected answer past the caps
            status = getattr(getattr(exc, "response", None), "status_code", None)
            return f"HTTP {status}" if status else type(exc).__name__

    while time.monotonic() < until:
        for outcome in await asyncio.gather(*(one(n) for n in range(PENDING_SOCKETS))):
            outcomes.note(f"{PENDING_SOCKETS} silent sockets from one address, no key", outcome)


def upload_bomb(name: str, make: Callable[[], tuple[str, bytes]], user: int) -> Attack:
    async def attack(url: str, until: float, outcomes: Outcomes) -> None:
        filename, data = make()
        async with httpx.AsyncClient(base_url=url, timeout=RECV_TIMEOUT_S, headers=remote(user)) as http:
            while time.monotonic() < until:
                try:
                    response = await http.post("/v1/audio/transcriptions", files={"file": (filename, data)},
                                               data={"model": "whisper-1"})
                    outcome = f"HTTP {response.status_code} {response.json().get('code', '')}".strip()
                except (httpx.HTTPError, ValueError) as exc:
                    outcome = type(exc).__name__
                outcomes.note(name, outcome)
                await asyncio.sleep(0.5)

    return attack


async def context_hog(url: str, until: float, outcomes: Outcomes) -> None:
    path = "/v1/text-to-speech/alba/multi-stream-input?output_format=pcm_24000"
    name = "one key, 4 sockets x 5 contexts"

    async def socket(n: int) -> None:
        try:
            async with connect(ws_url(url, path), additional_headers=remote(220)) as ws:
                for context in range(5):
                    await ws.send(json.dumps({"text": "Hold this slot for a long while please. ",
                                              "context_id": f"c{n}-{context}"}))
                while time.monotonic() < until:
                    await ws.send(json.dumps({"text": "", "context_id": f"c{n}-0"}))  # keepalive
                    with contextlib.suppress(asyncio.TimeoutError):
                        while True:  # read what came meanwhile: audio, and each refused context's error
                            message = await asyncio.wait_for(ws.recv(), 5.0)
                            if isinstance(message, str) and "error" in message:
                                outcomes.note(name, "context refused: " + json.loads(message).get("error", "")[:40])
            outcomes.note(name, "socket held to the end")
        except (ConnectionClosed, OSError, asyncio.TimeoutError) as exc:
            code = getattr(getattr(exc, "rcvd", None), "code", None)
            outcomes.note(name, f"close {code}" if code else type(exc).__name__)

    while time.monotonic() < until:
        await asyncio.gather(*(socket(n) for n in range(4)))
        await asyncio.sleep(1.0)


def wyoming_flood(port: int, speech: bytes) -> Attack:
    async def attack(url: str, until: float, outcomes: Outcomes) -> None:
        from wyoming.asr import Transcribe
        from wyoming.audio import AudioChunk, AudioStart, AudioStop
        from wyoming.client import AsyncTcpClient

        audio = speech * (300 * 32000 // len(speech) + 1)  # 300 s of speech
        while time.monotonic() < until:
            try:
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    await client.write_event(Transcribe().event())
                    await client.write_event(AudioStart(rate=16000, width=2, channels=1).event())
                    pushed = time.monotonic()
                    for offset in range(0, len(audio), 32000):
                        if time.monotonic() > until:
                            break
                        await client.write_event(AudioChunk(rate=16000, width=2, channels=1,
                                                            audio=audio[offset:offset + 32000]).event())
                    await client.write_event(AudioStop().event())
                    outcomes.note("wyoming 300 s pushed at once", f"taken in {time.monotonic() - pushed:.0f} s")
            except (OSError, asyncio.TimeoutError) as exc:
                outcomes.note("wyoming 300 s pushed at once", type(exc).__name__)
            await asyncio.sleep(0.5)

    return attack


def attacks(wyoming_port: int | None, speech: bytes) -> list[Attack]:
    found: list[Attack] = [
        dictation_bomb("dictation ogg of 2-byte opus packets", "encoding=ogg",
                       lambda: [stream_bombs.ogg_opus_bomb()], 101),
        dictation_bomb("dictation webm of 2-byte opus packets", "encoding=webm",
                       lambda: [stream_bombs.webm_opus_bomb()], 102),
        dictation_bomb("dictation 1 MiB mu-law messages", "encoding=mulaw&sample_rate=8000",
                       lambda: [stream_bombs.mulaw_message()] * 4, 103),
        dictation_bomb("dictation ogg pages of a never-ending packet", "encoding=ogg",
                       lambda: [stream_bombs.endless_packet_pages(first_serial=1 + n * 16, bos=True)
                                for n in range(200)], 104),
        preauth_json,
        pending_sockets,
        upload_bomb("upload m4a claiming 2^30 samples a chunk",
                    lambda: ("bomb.m4a", file_bombs.sample_table_bomb()), 105),
        upload_bomb("upload mov with a 16000x16000 png track",
                    lambda: ("bomb.mov", file_bombs.png_track_bomb()), 106),
        context_hog,
    ]
    if wyoming_port is not None:
        found.append(wyoming_flood(wyoming_port, speech))
    return found


async def rss_sampler(http: httpx.AsyncClient, trace: list[tuple[float, float]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(httpx.HTTPError):
            for line in (await http.get("/metrics")).text.splitlines():
                if line.startswith("voxgate_process_resident_bytes "):
                    trace.append((time.monotonic(), float(line.split()[1])))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


@dataclass
class Phase:
    name: str
    latencies: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    rss: list[tuple[float, float]] = field(default_factory=list)

    def row(self) -> str:
        mib = [v / 2**20 for _, v in self.rss] or [float("nan")]
        return (f"| {self.name} | {len(self.latencies)} | {percentile(self.latencies, 50):.2f} | "
                f"{percentile(self.latencies, 95):.2f} | {mib[0]:.0f} | {max(mib):.0f} | {mib[-1]:.0f} |")


def attack_for(url: str, seconds: float, wyoming_port: int | None, speech: bytes) -> list[str]:
    """Every attack for ``seconds``, in a process of its own (building and sending
    bombs costs the attacker CPU, which must not delay the probes' clocks); what
    each was answered."""
    outcomes = Outcomes()

    async def main() -> None:
        until = time.monotonic() + seconds
        results = await asyncio.gather(*(attack(url, until, outcomes) for attack in attacks(wyoming_port, speech)),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                outcomes.note("attacker crashed", f"{type(result).__name__}: {str(result)[:80]}")

    asyncio.run(main())
    return outcomes.lines()


async def run_phase(phase: Phase, url: str, seconds: float, clips: list[tuple[bytes, float]], probes: int,
                    background: Callable[[float], Awaitable[None]],
                    hostile: Callable[[float], Awaitable[list[str]]] | None = None) -> list[str]:
    """One phase; with ``hostile``, the attacks run beside it and their outcomes are returned."""
    until = time.monotonic() + seconds
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=url, timeout=10, headers=ADMIN) as http:
        sampler = asyncio.create_task(rss_sampler(http, phase.rss, stop))
        attacking = asyncio.ensure_future(hostile(seconds)) if hostile is not None else None
        work = [probe_loop(url, until, clips, 10 + n, phase.latencies, phase.failures) for n in range(probes)]
        work.append(background(until))
        results = await asyncio.gather(*work, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                phase.failures[f"{type(result).__name__}: {str(result)[:80]}"] += 1
        answered = await attacking if attacking is not None else []
        stop.set()
        await sampler
    return answered


def report(quiet: Phase, hostile: Phase, answered: list[str], idle_mib: float) -> str:
    ratio = statistics.median(hostile.latencies) / statistics.median(quiet.latencies) \
        if quiet.latencies and hostile.latencies else float("nan")
    lines = ["| phase | finals | p50 (s) | p95 (s) | RSS start (MiB) | RSS peak (MiB) | RSS end (MiB) |",
             "|---|---|---|---|---|---|---|", quiet.row(), hostile.row(), "",
             (f"normal finals, hostile p50 / quiet p50: {ratio:.2f}x (target <= 1.2x); "
              f"gateway RSS idle after both phases: {idle_mib:.0f} MiB"), "", "what each attack was answered:",
             *answered]
    for phase in (quiet, hostile):
        if phase.failures:
            lines.append(f"normal-user failures ({phase.name}): "
                         + ", ".join(f"{k} x{v}" for k, v in phase.failures.items()))
    return "\n".join(lines)


def speech_clips(clips: list[bytes]) -> list[tuple[bytes, float]]:
    """The soak's dictation clips (speech, then 1 s of silence) with where their speech ends."""
    return [(clip, len(clip) / 32000 - 1.0) for clip in clips]


async def run(url: str, clients: int, minutes: float, warmup_minutes: float, speech: list[bytes],
              wyoming_port: int | None, background: Callable[[float, int], Awaitable[None]], probes: int) -> str:
    """Warm-up, then the quiet phase and the hostile phase, ``minutes`` each;
    ``background(until, seed)`` is one loop of the soak's normal mix."""
    clips = speech_clips(speech)

    def normal_mix(seed: int) -> Callable[[float], Awaitable[None]]:
        async def mix(until: float) -> None:
            await asyncio.gather(*(background(until, seed + n) for n in range(clients)))
        return mix

    await run_phase(Phase("warm-up"), url, warmup_minutes * 60, clips, probes, normal_mix(1000))
    quiet, hostile = Phase("quiet"), Phase("hostile")
    await run_phase(quiet, url, minutes * 60, clips, probes, normal_mix(0))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as attacker:
        async def attack_all(seconds: float) -> list[str]:
            return await asyncio.get_running_loop().run_in_executor(attacker, attack_for, url, seconds, wyoming_port,
                                                                    speech[0])
        answered = await run_phase(hostile, url, minutes * 60, clips, probes, normal_mix(100), attack_all)
    async with httpx.AsyncClient(base_url=url, timeout=10, headers=ADMIN) as http:
        await asyncio.sleep(10.0)  # dropped sockets and refused uploads are torn down in the background
        text = (await http.get("/metrics")).text
    idle = next((float(line.split()[1]) for line in text.splitlines()
                 if line.startswith("voxgate_process_resident_bytes ")), float("nan"))
    return report(quiet, hostile, answered, idle / 2**20)
