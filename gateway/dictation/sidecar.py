"""Supervisor and client of the ASR sidecar process (engines/asr).

One ``AsrSupervisor`` per gateway, owned by the lifespan. It starts
``python -m engines.asr``, relays every dictation stream over the framed pipe,
and when the process dies restarts it with backoff (immediately, then 1 s,
5 s, 15 s, capped) and replays every stream's retained audio into the new
process, so a crash loses no speech: each ``AsrStream`` keeps the audio of its
open utterances (and a few seconds before them) until their finals arrive.

Event invariants the client relies on are enforced here, whatever the sidecar
does across a restart: one ``speech_started`` per utterance, ``stable`` only
grows, one ``final`` per utterance, in order, never a partial after it.
Hung processes: gateway/dictation/watchdog.py; crash-looping audio:
gateway/dictation/faults.py.

Concurrency: everything runs on the event loop. One supervisor task owns the
process (spawn, read, restart); a second pumps its stderr into the log.
Writes to the pipe are single ``write`` calls of whole frames, so frames of
different streams never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sys
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from engines.asr.framing import MAX_PAYLOAD_BYTES, FrameError, encode_frame, pcm_to_bytes, read_frame_async
from engines.asr.models import ModelMissing, ResolvedModel, resolve_model
from engines.base import EngineState, EngineStatus
from gateway.config import Settings
from gateway.dictation.faults import blame, crash_error, unavailable_error
from gateway.dictation.stream import AsrStream, asr_unavailable_event
from gateway.dictation.watchdog import Watchdog
from gateway.errors import GatewayError, TooLarge, Unavailable

log = logging.getLogger("voxgate.asr")

BACKOFF_S = (0.0, 1.0, 5.0, 15.0)
HEALTHY_AFTER_S = 60.0  # a process that lived this long resets the backoff
START_TIMEOUT_S = 90.0
WRITE_TIMEOUT_S = 10.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # where `python -m engines.asr` runs


class AsrSupervisor:
    """Owns the sidecar process. ``start`` never raises; ``status`` says what happened."""

    def __init__(self, *, model: str, data_dir: Path, compute_type: str = "int8", threads: int = 0,
                 python: str = sys.executable, start_timeout_s: float = START_TIMEOUT_S,
                 backoff_s: tuple[float, ...] = BACKOFF_S, env: Mapping[str, str] | None = None, lanes: int = 0,
                 watchdog: Watchdog | None = None, batch: int = 4, final_window: str = "auto") -> None:
        self.model_name, self.data_dir = model, data_dir
        self.compute_type, self.threads = compute_type, threads
        self.decode_args = ("--threads", str(threads), "--lanes", str(lanes), "--batch", str(batch),
                            "--final-window", final_window)
        self.python, self.start_timeout_s, self.backoff_s = python, start_timeout_s, backoff_s
        self.env = dict(env) if env is not None else None  # None: inherit this process's environment
        self._watchdog = watchdog or Watchdog()
        self.restarts = 0
        self._state = EngineStatus(EngineState.LOADING, "not started")
        self._resolved: ResolvedModel | None = None
        self._hello: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._streams: dict[str, AsrStream] = {}
        self._requests: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # first start finished, one way or the other
        self._task: asyncio.Task[None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_tail: deque[str] = deque(maxlen=20)
        self._closing = False
        self._held: list[AsrStream] = []  # the streams the last process had when it ended

    @classmethod
    def from_settings(cls, settings: Settings, env: Mapping[str, str] | None = None) -> AsrSupervisor:
        return cls(model=settings.asr_model, data_dir=settings.data_dir, compute_type=settings.asr_compute_type,
                   threads=settings.asr_threads, lanes=settings.asr_lanes, batch=settings.asr_batch,
                   final_window=settings.asr_final_window, env=env)

    # ---- engine interface

    @property
    def closing(self) -> bool:
        """True once ``aclose`` began (read as a property: it changes while supervision awaits)."""
        return self._closing

    def status(self) -> EngineStatus:
        return self._state

    def info(self) -> dict[str, Any]:
        languages = self._hello.get("languages")
        if languages is None and self._resolved is not None and self._resolved.english_only:
            languages = ["en"]
        return {"model": self.model_name, "languages": languages or [],
                "multilingual": self._hello.get("multilingual"), "compute_type": self.compute_type,
                "restarts": self.restarts, "streams": len(self._streams)}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def start(self) -> None:
        """Start the sidecar and wait until it is ready or has failed (never raises)."""
        try:
            self._resolved = resolve_model(self.model_name, self.data_dir)
        except ModelMissing as exc:
            self._state = EngineStatus(EngineState.MISSING, str(exc), exc.hint)
            self._settled.set()
            return
        self._task = asyncio.create_task(self._supervise(), name="asr-supervisor")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self.start_timeout_s + 5)

    async def wait_ready(self, timeout_s: float) -> bool:
        """True once the sidecar is ready; False as soon as its first start has
        failed, or when ``timeout_s`` has passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            await asyncio.wait_for(self._settled.wait(), timeout_s)
            if self._state.state in (EngineState.MISSING, EngineState.FAILED):
                return False
            await asyncio.wait_for(self._ready.wait(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        self._closing = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        for task in (self._task, self._stderr_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for future in self._requests.values():
            if not future.done():
                future.set_exception(Unavailable("the gateway is shutting down", code="asr_unavailable"))

    # ---- streams and requests

    async def open_stream(self, options: dict[str, Any]) -> AsrStream:
        stream = AsrStream(self, f"s{next(self._ids)}", options)
        self._streams[stream.id] = stream
        if self._ready.is_set():
            await self.write(stream.open_header())
            stream.live = True
        return stream

    def forget(self, stream: AsrStream) -> None:
        self._streams.pop(stream.id, None)

    async def transcribe(self, samples: np.ndarray, *, language: str | None, word_timestamps: bool,
                         timeout_s: float) -> dict[str, Any]:
        """Transcribe a whole file (16 kHz float32). Raises Unavailable / GatewayError."""
        if len(samples) * 4 > MAX_PAYLOAD_BYTES:  # one frame carries it; a larger one the sidecar would refuse
            raise TooLarge(f"{len(samples) / 16000 / 60:.1f} min of audio is more than one transcription takes "
                           f"({MAX_PAYLOAD_BYTES // 4 / 16000 / 60:.1f} min)")
        if not await self.wait_ready(min(timeout_s, 30.0)):
            raise unavailable_error(self._state)
        req = f"r{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._requests[req] = future
        try:
            await self.write({"op": "transcribe", "req": req, "language": language,
                              "word_timestamps": word_timestamps}, pcm_to_bytes(samples))
            return await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            raise Unavailable(f"transcription did not finish within {timeout_s:.0f} s", code="asr_timeout",
                              retry_after_s=5) from None
        finally:
            self._requests.pop(req, None)

    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None or proc.stdin is None:
            return  # the stream is replayed into the next process
        try:
            proc.stdin.write(encode_frame(header, payload))
            await asyncio.wait_for(proc.stdin.drain(), WRITE_TIMEOUT_S)
        except (ConnectionError, BrokenPipeError, RuntimeError):
            pass  # the reader sees the process end and restarts it
        except asyncio.TimeoutError:
            log.error("ASR sidecar did not read its input for %.0f s; restarting it", WRITE_TIMEOUT_S)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    # ---- the process

    async def _supervise(self) -> None:
        attempt = 0
        while not self._closing:
            try:
                ok = await self._launch()
                if not ok and not self._settled.is_set():
                    self._settled.set()  # the first start failed: report it, do not loop
                    return
                if ok:
                    started = await self._run_process()
                    if self.closing:
                        return
                    healthy = time.monotonic() - started > HEALTHY_AFTER_S
                    attempt = 0 if healthy else attempt  # a long-lived process resets the backoff
                    self._lost_process(crash_loop=not healthy)
            except Exception:  # supervision must go on, never stop silently with the status left at ready
                log.exception("ASR supervision failed; restarting the sidecar")
                if self._proc is not None and self._proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        self._proc.kill()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._proc.wait(), WRITE_TIMEOUT_S)
                self._process_ended()
                self._lost_process(crash_loop=False)
            delay = self.backoff_s[min(attempt, len(self.backoff_s) - 1)]
            attempt += 1
            self.restarts += 1
            self._state = EngineStatus(EngineState.LOADING, f"restarting the ASR sidecar (attempt {attempt})")
            await asyncio.sleep(delay)

    async def _run_process(self) -> float:
        """Serve a started process until it ends; when it started."""
        self._settled.set()
        started = time.monotonic()
        self._state = EngineStatus(EngineState.READY)
        await self._replay_all()
        self._ready.set()
        await self._read_events()
        self._process_ended()
        return started

    def _process_ended(self) -> None:
        self._ready.clear()
        self._held = [s for s in self._streams.values() if s.live]
        for stream in self._held:
            stream.live = False

    def _lost_process(self, crash_loop: bool) -> None:
        code = self._proc.returncode if self._proc is not None else None
        tail = " | ".join(list(self._stderr_tail)[-3:])
        log.error("ASR sidecar exited (code %s)%s; restarting", code, f": {tail}" if tail else "")
        for stream in blame(self._held, crash_loop):
            self.forget(stream)
            stream.fail(crash_error())
        message = "the ASR sidecar restarted; audio is kept and replayed, nothing is lost"
        for stream in list(self._streams.values()):
            stream.report(asr_unavailable_event(message))
        for future in self._requests.values():
            if not future.done():
                future.set_exception(Unavailable("the ASR sidecar restarted during the transcription; retry",
                                                 code="asr_unavailable", retry_after_s=2))

    async def _launch(self) -> bool:
        assert self._resolved is not None
        args = [self.python, "-m", "engines.asr", "--model", self._resolved.source, "--model-id",
                self._resolved.id, "--compute-type", self.compute_type, *self.decode_args]
        try:
            proc = await asyncio.create_subprocess_exec(
                *args, cwd=str(PROJECT_ROOT), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=1 << 20, env=self.env)
        except OSError as exc:
            self._state = EngineStatus(EngineState.FAILED, f"cannot start the ASR sidecar: {exc}")
            return False
        self._proc = proc
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        self._stderr_task = asyncio.create_task(self._pump_stderr(proc), name="asr-stderr")
        assert proc.stdout is not None  # spawned with stdout=PIPE
        try:
            frame = await asyncio.wait_for(read_frame_async(proc.stdout), self.start_timeout_s)
        except (asyncio.TimeoutError, FrameError) as exc:
            reason = "timed out loading the model" if isinstance(exc, asyncio.TimeoutError) else str(exc)
            return await self._failed_start(proc, f"the ASR sidecar did not start: {reason}")
        if frame is None or frame[0].get("ev") != "ready":
            if frame is not None and frame[0].get("ev") == "fatal":
                reason = frame[0].get("message", "")
            else:
                await asyncio.sleep(0.2)  # let stderr drain: the traceback says why
                reason = "exited during start-up" + (f": {self._stderr_tail[-1]}" if self._stderr_tail else "")
            return await self._failed_start(proc, f"the ASR sidecar did not start: {reason}")
        self._hello = frame[0]
        return True

    async def _failed_start(self, proc: asyncio.subprocess.Process, detail: str) -> bool:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        self._state = EngineStatus(EngineState.FAILED, detail, "check VOXGATE_ASR_MODEL and pip install 'voxgate[asr]'")
        log.error("%s", detail)
        return False

    async def _replay_all(self) -> None:
        # streams opened while this runs are picked up by the next pass; the ready flag
        # is set by the caller with no await after the last pass, so none is missed
        while True:
            pending = [s for s in self._streams.values() if not s.live]
            if not pending:
                return
            for stream in pending:
                await self._replay(stream)

    async def _replay(self, stream: AsrStream) -> None:
        if stream.ended:
            stream.live = True
            return
        await self.write(stream.open_header())
        index = 0
        while index < len(stream.retention):
            frames, index = stream.replay_frames(index)
            for frame in frames:
                await self._write_raw(frame)
        if stream.ending:
            await self.write({"op": "end", "stream": stream.id})
        stream.live = True  # no await since the last check: nothing logged was missed

    async def _write_raw(self, frame: bytes) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return
        with contextlib.suppress(ConnectionError, BrokenPipeError, RuntimeError):
            proc.stdin.write(frame)
            await asyncio.wait_for(proc.stdin.drain(), WRITE_TIMEOUT_S)

    async def _read_events(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        async with self._watchdog.watching(proc, ping=lambda: self.write({"op": "ping"})):
            while True:
                try:
                    frame = await read_frame_async(proc.stdout)
                except FrameError as exc:
                    log.error("ASR sidecar sent a bad frame (%s); restarting it", exc)
                    frame = None
                if frame is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
                    return
                self._watchdog.heard(frame[0])
                try:
                    self._dispatch(frame[0])
                except Exception:  # one malformed event must not stop the relay
                    log.exception("ASR sidecar sent an event the gateway cannot use: %.200r", frame[0])

    def _dispatch(self, event: dict[str, Any]) -> None:
        kind = event.get("ev")
        if kind == "pong":  # the answer to the watchdog's ping, which has heard it
            return
        if kind == "lag":
            for sid, lag in event.get("streams", {}).items():
                stream = self._streams.get(sid)
                if stream is not None:
                    stream.lag_s = float(lag)
            return
        if "req" in event:
            future = self._requests.get(event["req"])
            if future is not None and not future.done():
                if kind == "transcription":
                    future.set_result(event)
                else:
                    code = event.get("code", "asr_failed")
                    future.set_exception(GatewayError(event.get("message", ""), code=code))
            return
        stream = self._streams.get(event.get("stream", ""))
        if stream is not None:
            stream.deliver(event)

    async def _pump_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while True:
            line = await proc.stderr.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self._stderr_tail.append(text)
                log.info("sidecar: %s", text)
