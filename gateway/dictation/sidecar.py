"""Supervisor and client of the ASR sidecar process (engines/asr).

One ``AsrSupervisor`` per gateway, owned by the lifespan. It starts
``python -m engines.asr``, reads its frames as typed events
(gateway/dictation/pipe.py) and hands them to the streams and requests they
name (gateway/dictation/streams.py), and when the process dies restarts it with
backoff (immediately, then 1 s, 5 s, 15 s, capped) and replays every stream's
retained audio into the new process (gateway/dictation/replay.py), so a crash
loses no speech: each ``AsrStream`` keeps the audio of its open utterances (and
a few seconds before them) until their finals arrive, and filters the events so
the client's invariants hold across the restart.
Hung processes: gateway/dictation/watchdog.py; crash-looping audio:
gateway/dictation/faults.py.

Concurrency: everything runs on the event loop. One supervisor task owns the
process (spawn, read, restart; one process: gateway/dictation/process.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from engines.asr.framing import MAX_PAYLOAD_BYTES, encode_frame, pcm_to_bytes
from engines.asr.framing import SAMPLE_RATE as ASR_RATE
from engines.asr.models import ResolvedModel, resolve_model
from engines.asr.utterance import DEFAULT_FINAL_WINDOW
from engines.base import EngineState, EngineStatus
from engines.missing import ModelMissing
from gateway.config import Settings
from gateway.dictation.faults import blame, crash_error, unavailable_error
from gateway.dictation.pipe import PING_OP, Hello, PipeError, read_event, transcribe_op
from gateway.dictation.process import SidecarProcess
from gateway.dictation.replay import open_header, replay_streams
from gateway.dictation.stream import AsrStream
from gateway.dictation.streams import StreamTable
from gateway.dictation.watchdog import Watchdog
from gateway.errors import GatewayError, TooLarge, Unavailable
from gateway.protocol.common import ErrorEvent

log = logging.getLogger("voxgate.asr")

BACKOFF_S = (0.0, 1.0, 5.0, 15.0)
HEALTHY_AFTER_S = 60.0  # a process that lived this long resets the backoff
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 5.0  # at shutdown, a sidecar whose input is closed exits within this or is killed
RESTARTED = "the ASR sidecar restarted; audio is kept and replayed, nothing is lost"


class AsrSupervisor:
    """Owns the sidecar process. ``start`` never raises; ``status`` says what happened."""

    def __init__(self, *, model: str, data_dir: Path, compute_type: str = "int8", threads: int = 0,
                 python: str = sys.executable, start_timeout_s: float = START_TIMEOUT_S,
                 backoff_s: tuple[float, ...] = BACKOFF_S, env: Mapping[str, str] | None = None, lanes: int = 0,
                 watchdog: Watchdog | None = None, batch: int = 4, final_window: str = DEFAULT_FINAL_WINDOW,
                 turn_model: str = "off") -> None:
        self.model_name, self.data_dir = model, data_dir
        self.compute_type, self.threads = compute_type, threads
        self.decode_args: tuple[str, ...] = ("--threads", str(threads), "--lanes", str(lanes), "--batch", str(batch),
                                             "--final-window", final_window)
        self.turn_model = turn_model != "off"  # its streams may ask the end-of-turn model (engines/asr/turn_judge.py)
        self.decode_args += ("--turn-model", turn_model) if self.turn_model else ()
        self.python, self.start_timeout_s, self.backoff_s = python, start_timeout_s, backoff_s
        self.env = dict(env) if env is not None else None  # None: inherit this process's environment
        self._watchdog = watchdog or Watchdog()
        self.restarts = 0
        self._state = EngineStatus(EngineState.LOADING, "not started")
        self._resolved: ResolvedModel | None = None
        self._hello: Hello | None = None
        self._process: SidecarProcess | None = None
        self._table = StreamTable()
        self._streams = self._table.streams  # the same dict: the streams by id
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()  # first start finished, one way or the other
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._held: list[AsrStream] = []  # the streams the last process had when it ended

    @classmethod
    def from_settings(cls, settings: Settings, env: Mapping[str, str] | None = None) -> AsrSupervisor:
        return cls(model=settings.asr_model, data_dir=settings.data_dir, compute_type=settings.asr_compute_type,
                   threads=settings.asr_threads, lanes=settings.asr_lanes, batch=settings.asr_batch,
                   final_window=settings.asr_final_window, turn_model=settings.asr_turn_model, env=env)

    # ---- engine interface

    @property
    def closing(self) -> bool:
        """True once ``aclose`` began (read as a property: it changes while supervision awaits)."""
        return self._closing

    def status(self) -> EngineStatus:
        return self._state

    def info(self) -> dict[str, Any]:
        hello = self._hello
        languages = hello.languages if hello is not None else None
        if languages is None and self._resolved is not None and self._resolved.english_only:
            languages = ["en"]
        return {"model": self.model_name, "languages": languages or [],
                "multilingual": hello.multilingual if hello is not None else None,
                "compute_type": self.compute_type, "restarts": self.restarts, "streams": len(self._streams),
                "turn_model": self.turn_model}

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.proc.pid if process is not None and process.running else None

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
        if self._process is not None:
            await self._process.stop(STOP_TIMEOUT_S)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._table.fail_requests(lambda: Unavailable("the gateway is shutting down", code="asr_unavailable"))

    # ---- streams and requests

    @property
    def streams(self) -> Mapping[str, AsrStream]:
        """The open streams by id."""
        return self._streams

    async def open_stream(self, options: dict[str, Any]) -> AsrStream:
        stream = self._table.add(self, options)
        if self._ready.is_set():
            await self.write(open_header(stream))
            stream.live = True
        return stream

    def forget(self, stream: AsrStream) -> None:
        self._table.forget(stream)

    async def transcribe(self, samples: np.ndarray, *, language: str | None, word_timestamps: bool,
                         timeout_s: float, prompt: str = "", terms: tuple[str, ...] = ()) -> dict[str, Any]:
        """Transcribe a whole file (float32 at ASR_RATE). Raises Unavailable / GatewayError."""
        if len(samples) * 4 > MAX_PAYLOAD_BYTES:  # one frame carries it; a larger one the sidecar would refuse
            raise TooLarge(f"{len(samples) / ASR_RATE / 60:.1f} min of audio is more than one transcription takes "
                           f"({MAX_PAYLOAD_BYTES // 4 / ASR_RATE / 60:.1f} min)")
        if not await self.wait_ready(min(timeout_s, 30.0)):
            raise unavailable_error(self._state)
        req, future = self._table.new_request()
        try:
            await self.write(transcribe_op(req, language, word_timestamps, prompt, terms), pcm_to_bytes(samples))
            return await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            raise Unavailable(f"transcription did not finish within {timeout_s:.0f} s", code="asr_timeout",
                              retry_after_s=5) from None
        finally:
            self._table.drop_request(req)

    async def write(self, header: dict[str, Any], payload: bytes = b"") -> None:
        """One frame to the running process; dropped while there is none (the streams are replayed)."""
        await self.write_raw(encode_frame(header, payload))

    async def write_raw(self, frame: bytes) -> None:
        """An encoded frame, as is (a replay's)."""
        if self._process is not None:
            await self._process.write(frame)

    def on_frame(self, header: dict[str, Any]) -> None:
        """One frame header from the sidecar: its typed event goes to the stream or request it names."""
        try:
            event = read_event(header)
        except PipeError as exc:
            self._watchdog.heard(None)  # a bad event is still a sign of life
            log.error("ASR sidecar sent an event the gateway cannot use (%s): %.200r", exc, header)
            return
        self._watchdog.heard(event)
        try:
            self._table.dispatch(event)
        except Exception:  # one event a stream cannot take must not stop the relay
            log.exception("ASR sidecar sent an event the gateway cannot use: %.200r", header)

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
                if self._process is not None and self._process.running:
                    await self._process.kill()
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
        await replay_streams(self._streams, self)
        self._ready.set()
        await self._read_events()
        self._process_ended()
        return started

    def _process_ended(self) -> None:
        self._ready.clear()
        self._held = self._table.take_back()

    def _lost_process(self, crash_loop: bool) -> None:
        process = self._process
        code = process.proc.returncode if process is not None else None
        tail = process.last_words() if process is not None else ""
        log.error("ASR sidecar exited (code %s)%s; restarting", code, f": {tail}" if tail else "")
        for stream in blame(self._held, crash_loop):
            self.forget(stream)
            stream.fail(crash_error())
        self._table.report(ErrorEvent.of(GatewayError(RESTARTED, code="asr_unavailable")))
        self._table.fail_requests(lambda: Unavailable("the ASR sidecar restarted during the transcription; retry",
                                                      code="asr_unavailable", retry_after_s=2))

    async def _launch(self) -> bool:
        assert self._resolved is not None
        args = [self.python, "-m", "engines.asr", "--model", self._resolved.source, "--model-id",
                self._resolved.id, "--compute-type", self.compute_type, *self.decode_args]
        if self._process is not None:
            await self._process.stop_pumping()
        try:
            self._process = process = await SidecarProcess.spawn(args, self.env)
        except OSError as exc:
            self._state = EngineStatus(EngineState.FAILED, f"cannot start the ASR sidecar: {exc}")
            return False
        hello = await process.hello(self.start_timeout_s)
        if isinstance(hello, str):
            await process.kill()
            detail = f"the ASR sidecar did not start: {hello}"
            self._state = EngineStatus(EngineState.FAILED, detail,
                                       "check VOXGATE_ASR_MODEL and pip install 'voxgate[asr]'")
            log.error("%s", detail)
            return False
        self._hello = hello
        return True

    async def _read_events(self) -> None:
        process = self._process
        assert process is not None
        async with self._watchdog.watching(process.proc, ping=lambda: self.write(PING_OP)):
            while (frame := await process.read_frame()) is not None:
                self.on_frame(frame[0])
