"""One ASR sidecar process: spawned, its first frame read, whole frames
written to its stdin, its stderr pumped into the log (the last lines kept to
say why it died). Restarting it is the supervisor's (gateway/dictation/sidecar.py).

Writes are single ``write`` calls of whole frames, so frames of different
streams never interleave; a process that does not read its input for
``WRITE_TIMEOUT_S`` is killed (its reader sees it end, and it is restarted).

Runs on the event loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engines.asr.framing import FrameError, read_frame_async
from gateway.dictation.pipe import Fatal, Hello, PipeError, read_event

log = logging.getLogger("voxgate.asr")

WRITE_TIMEOUT_S = 10.0
STDERR_TAIL_LINES = 20
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # where `python -m engines.asr` runs


class SidecarProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task = asyncio.create_task(self._pump_stderr(), name="asr-stderr")

    @classmethod
    async def spawn(cls, args: Sequence[str], env: Mapping[str, str] | None) -> SidecarProcess:
        """Start ``args`` with its three pipes; ``OSError`` when it cannot be started."""
        proc = await asyncio.create_subprocess_exec(
            *args, cwd=str(PROJECT_ROOT), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, limit=1 << 20, env=dict(env) if env is not None else None)
        return cls(proc)

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    async def hello(self, timeout_s: float) -> Hello | str:
        """The process's ``Hello`` once its model is loaded, or why it did not start."""
        assert self.proc.stdout is not None  # spawned with stdout=PIPE
        try:
            frame = await asyncio.wait_for(read_frame_async(self.proc.stdout), timeout_s)
        except (asyncio.TimeoutError, FrameError) as exc:
            return "timed out loading the model" if isinstance(exc, asyncio.TimeoutError) else str(exc)
        first = _start_event(frame[0]) if frame is not None else None
        if isinstance(first, Hello):
            return first
        if isinstance(first, Fatal):
            return first.message
        await asyncio.sleep(0.2)  # let stderr drain: the traceback says why
        return "exited during start-up" + (f": {self.stderr_tail[-1]}" if self.stderr_tail else "")

    async def read_frame(self) -> tuple[dict[str, Any], bytes] | None:
        """The next frame; None once the process ended or sent a bad frame (it is killed then)."""
        assert self.proc.stdout is not None
        try:
            frame = await read_frame_async(self.proc.stdout)
        except FrameError as exc:
            log.error("ASR sidecar sent a bad frame (%s); restarting it", exc)
            frame = None
        if frame is None:
            await self.kill()
        return frame

    async def write(self, frame: bytes) -> None:
        """One encoded frame; dropped when the process has ended (its streams are replayed)."""
        stdin = self.proc.stdin
        if stdin is None or not self.running:
            return
        try:
            stdin.write(frame)
            await asyncio.wait_for(stdin.drain(), WRITE_TIMEOUT_S)
        except (ConnectionError, BrokenPipeError, RuntimeError):
            pass  # the reader sees the process end and restarts it
        except asyncio.TimeoutError:
            log.error("ASR sidecar did not read its input for %.0f s; restarting it", WRITE_TIMEOUT_S)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), WRITE_TIMEOUT_S)

    async def stop(self, timeout_s: float) -> None:
        """Close its input (it exits when it has read it all); killed past ``timeout_s``."""
        if self.running:
            if self.proc.stdin is not None:
                with contextlib.suppress(Exception):
                    self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        await self.stop_pumping()

    async def stop_pumping(self) -> None:
        self._stderr_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._stderr_task

    def last_words(self) -> str:
        """The end of its stderr, for the log line that says it died."""
        return " | ".join(list(self.stderr_tail)[-3:])

    async def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self.stderr_tail.append(text)
                log.info("sidecar: %s", text)


def _start_event(header: dict[str, Any]) -> Hello | Fatal | None:
    try:
        event = read_event(header)
    except PipeError:
        return None
    return event if isinstance(event, Hello | Fatal) else None
