"""The gateway's side of the upload decoders (gateway/codecs/decode_worker.py).

``DecoderPool`` is owned by the app's lifespan. It keeps up to ``size``
decoder processes (one per allowed concurrent transcription), each decoding
one file at a time: a worker is started on first need and then kept, so a
file costs a pipe round trip, not an interpreter start. A worker that dies,
is killed or retires is replaced in the background.

What a caller gets (``decode``): a ``DecodedFile``; ``AudioTooLong`` past the
duration cap; ``AudioFormatError`` for a file that cannot be decoded, including
one whose decode the limits ended (past the memory or CPU allowance, or any
death of the process during a file: the message says which); ``OverCapacity``
when no worker is free within ``wait_s``; ``Unavailable`` (``asr_timeout``) when
a decode outlasts its wall-clock bound (the machine is overloaded, not the
file too costly: the CPU limit is what bounds a file); ``CodecUnavailable``
when no worker can start.

Concurrency: everything runs on the event loop; a worker is held by one caller
from ``_take`` to ``_give_back``. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engines.asr.framing import MAX_PAYLOAD_BYTES, FrameError, encode_frame, read_frame_async
from gateway.audio import AudioFormatError, AudioTooLong
from gateway.codecs.files import DecodedFile
from gateway.codecs.pyav import CodecUnavailable
from gateway.errors import OverCapacity, Unavailable

log = logging.getLogger("voxgate.decode")

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # where `python -m gateway.codecs.decode_worker` runs
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
# One FFmpeg decode needs neither BLAS threads nor glibc's per-thread arenas, which only reserve address space.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}
WORKER_MODULE = "gateway.codecs.decode_worker"


@dataclass(frozen=True)
class DecodeLimits:
    memory_mb: int  # address space a decoder may take past its loaded size
    cpu_s: float  # CPU time per file
    wall_s: float = 0.0  # how long a caller waits for one file; 0: the CPU allowance with room for a busy machine

    def __post_init__(self) -> None:
        if not self.wall_s:
            object.__setattr__(self, "wall_s", 2.0 * self.cpu_s + 10.0)


class DecoderProcess:
    """One ``decode_worker`` process. Not shared: one caller at a time."""

    def __init__(self, proc: asyncio.subprocess.Process, limits: DecodeLimits, hello: dict[str, Any]) -> None:
        self.proc, self.limits, self.hello = proc, limits, hello
        self.reusable = True

    @classmethod
    async def start(cls, limits: DecodeLimits, *, python: str, env: Mapping[str, str],
                    timeout_s: float = START_TIMEOUT_S, module: str = WORKER_MODULE) -> DecoderProcess:
        try:
            proc = await asyncio.create_subprocess_exec(
                python, "-m", module, "--memory-mb", str(limits.memory_mb),
                "--cpu-s", str(limits.cpu_s), cwd=str(PROJECT_ROOT), env={**env, **WORKER_ENV},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None)
        except OSError as exc:
            raise CodecUnavailable(f"the file decoder process cannot start: {exc}") from None
        worker = cls(proc, limits, {})
        try:
            assert proc.stdout is not None  # spawned with stdout=PIPE
            frame = await asyncio.wait_for(read_frame_async(proc.stdout), timeout_s)
        except (asyncio.TimeoutError, FrameError) as exc:
            await worker.stop(kill=True)
            raise CodecUnavailable(f"the file decoder process did not start: {exc or 'timed out'}") from None
        except BaseException:
            await worker.stop(kill=True)
            raise
        if frame is None or not frame[0].get("ready"):
            await worker.stop(kill=True)
            raise CodecUnavailable(f"the file decoder process did not start (exit status {proc.returncode})")
        worker.hello = frame[0]
        missing = {"memory", "cpu"} - set(worker.hello.get("enforced", []))
        if missing:
            log.warning("the file decoder runs without its %s limit on this system", " and ".join(sorted(missing)))
        return worker

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def decode(self, data: bytes, out_rate: int, max_duration_s: float) -> DecodedFile:
        """Decode one file. On any failure to finish the exchange, the process is stopped."""
        self.reusable = False
        try:
            reply = await asyncio.wait_for(self._exchange(data, out_rate, max_duration_s), self.limits.wall_s)
        except asyncio.TimeoutError:
            await self.stop(kill=True)
            raise Unavailable(f"decoding the file did not finish within {self.limits.wall_s:g} s; the server is "
                              "busy, retry", code="asr_timeout", retry_after_s=5) from None
        except (FrameError, ConnectionError, asyncio.IncompleteReadError):
            reply = None
        except BaseException:  # cancelled mid-exchange: the pipe is out of step
            await self.stop(kill=True)
            raise
        if reply is None:
            await self.stop()
            raise AudioFormatError(self._death_reason())
        header, samples = reply
        self.reusable = not header.get("retire") and self.alive
        if header.get("ok"):
            return DecodedFile(samples, int(header["source_rate"]), str(header["container"]), str(header["codec"]))
        raise self._refusal(header)

    async def _exchange(self, data: bytes, out_rate: int,
                        max_duration_s: float) -> tuple[dict[str, Any], np.ndarray] | None:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None  # spawned with pipes
        stdin.write(encode_frame({"op": "decode", "rate": out_rate, "max_s": max_duration_s, "len": len(data)}))
        stdin.write(data)
        await stdin.drain()
        try:
            line = await stdout.readuntil(b"\n")
            header = json.loads(line)
        except (asyncio.LimitOverrunError, ValueError) as exc:
            raise FrameError(f"the decoder's answer is not a frame header: {exc}") from None
        size = header.get("len", 0) if isinstance(header, dict) else None
        if not isinstance(size, int) or not 0 <= size <= MAX_PAYLOAD_BYTES or size % 4:
            raise FrameError(f"the decoder answered a payload of {size!r} bytes")
        samples = np.empty(size // 4, dtype="<f4")  # filled straight from the pipe: the samples are held once
        view, filled = samples.data.cast("B"), 0
        while filled < size:
            chunk = await stdout.read(min(size - filled, 1 << 20))
            if not chunk:
                return None
            view[filled:filled + len(chunk)] = chunk
            filled += len(chunk)
        return header, samples

    def _refusal(self, header: dict[str, Any]) -> Exception:
        code, message = header.get("code"), str(header.get("message", ""))
        if code == "too_long":
            return AudioTooLong(message)
        if code == "codec_unavailable":
            return CodecUnavailable(message)
        if code == "memory":
            return AudioFormatError(f"decoding it needs more than the {self.limits.memory_mb} MB of memory a file "
                                    "may use")
        if code == "unexpected":
            log.warning("the file decoder failed unexpectedly on an upload: %s", message)
            return AudioFormatError(f"the decoder failed on this file ({message})")
        return AudioFormatError(message)

    def _death_reason(self) -> str:
        status = self.proc.returncode
        if status == -signal.SIGXCPU:
            return f"decoding it takes more than the {self.limits.cpu_s:g} s of CPU time a file may use"
        what = f"signal {signal.Signals(-status).name}" if status is not None and status < 0 else f"status {status}"
        return (f"the decoder process ended on this file ({what}); it may need more than the "
                f"{self.limits.memory_mb} MB of memory a file may use")

    async def stop(self, *, kill: bool = False) -> None:
        """End the process (``kill``: at once; else end of input, a kill past a
        few seconds) and reap it."""
        self.reusable = False
        if kill:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


class DecoderPool:
    """Up to ``size`` decoder processes, one file each at a time; owned by the lifespan."""

    def __init__(self, limits: DecodeLimits, size: int, *, env: Mapping[str, str], python: str = sys.executable,
                 wait_s: float = 30.0, start_timeout_s: float = START_TIMEOUT_S, module: str = WORKER_MODULE) -> None:
        self.limits, self.size, self.env, self.python = limits, size, dict(env), python
        self.wait_s, self.start_timeout_s, self.module = wait_s, start_timeout_s, module
        self._slots = asyncio.Semaphore(size)
        self._idle: list[DecoderProcess] = []
        self._workers: set[DecoderProcess] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.busy = 0  # decodes holding a worker now

    async def decode(self, data: bytes, out_rate: int, max_duration_s: float) -> DecodedFile:
        """``data`` decoded to mono float32 at ``out_rate`` by a worker (see the module's docstring)."""
        if self._closed:
            raise Unavailable("the server is stopping", code="going_away")
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait_s)
        except asyncio.TimeoutError:
            raise OverCapacity(f"all {self.size} file decoders are busy; try again later", retry_after_s=5) from None
        self.busy += 1
        try:
            worker = await self._take()
            try:
                return await worker.decode(data, out_rate, max_duration_s)
            finally:
                self._give_back(worker)
        finally:
            self.busy -= 1
            self._slots.release()

    @property
    def pids(self) -> list[int]:
        """The worker processes alive now (for tests and /v1/admin)."""
        return sorted(w.proc.pid for w in self._workers if w.alive)

    async def _take(self) -> DecoderProcess:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive and worker.reusable:
                return worker
            await self._forget(worker)
        worker = await self._start()
        self._workers.add(worker)
        return worker

    async def _start(self) -> DecoderProcess:
        return await DecoderProcess.start(self.limits, python=self.python, env=self.env,
                                          timeout_s=self.start_timeout_s, module=self.module)

    def _give_back(self, worker: DecoderProcess) -> None:
        if worker.reusable and worker.alive and not self._closed:
            self._idle.append(worker)
            return
        self._own(self._replace(worker))

    async def _replace(self, worker: DecoderProcess) -> None:
        """Reap a worker that is done and start its successor, so the next file finds one ready."""
        await self._forget(worker)
        if self._closed or len(self._workers) >= self.size:
            return
        try:
            fresh = await self._start()
        except CodecUnavailable as exc:
            log.error("%s", exc.message)  # the next file starts one itself and reports it
            return
        self._workers.add(fresh)
        if self._closed or len(self._workers) > self.size:  # a file started its own meanwhile
            await self._forget(fresh)
        else:
            self._idle.append(fresh)

    async def _forget(self, worker: DecoderProcess) -> None:
        await worker.stop()
        self._workers.discard(worker)

    def _own(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine, name="decoder-replace")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """Stop every worker (idle ones by end of input) and every replacement under way."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(worker.stop() for worker in list(self._workers)), return_exceptions=True)
        self._workers.clear()
        self._idle.clear()
