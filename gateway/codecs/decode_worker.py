"""The upload decoder process: ``python -m gateway.codecs.decode_worker
--memory-mb M --cpu-s S``, one decode at a time, started and fed by
gateway/codecs/decode_pool.py.

Uploads are decoded here and not in the gateway because a file's bytes choose
what FFmpeg allocates and how long it runs: a few hundred bytes of MP4 tables
or one deflated picture can ask for gigabytes. This process can take at most
``M`` MB of address space past what it holds once loaded (RLIMIT_AS, hard, so
nothing in it can lift it) and ``S`` s of CPU per file (RLIMIT_CPU, soft,
raised before each file; past it the kernel ends the process with SIGXCPU).

Wire (engines/asr/framing.py: a JSON header line, then ``len`` raw bytes):

    -> {"ready": true, "address_space_mb": 217, "enforced": ["memory", "cpu"]}   once, at start
    <- {"op": "decode", "rate": 16000, "max_s": 900.0, "len": N} + the file
    -> {"ok": true, "source_rate": 44100, "container": "mov", "codec": "aac", "retire": false, "len": M}
       + M bytes of float32 little-endian samples at ``rate``
    -> {"ok": false, "code": "bad_audio" | "too_long" | "codec_unavailable" | "memory" | "unexpected",
        "message": "...", "retire": true | false}

A reply with ``retire`` true is this process's last: it exits after it, so a
heap grown or fragmented by one file never shrinks the room of the next.
End of input ends the process (status 0).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import resource
import sys
from typing import Any, BinaryIO

import numpy as np

from engines.asr.framing import FrameError, encode_frame, read_frame, write_frame
from gateway.audio import AudioFormatError, AudioTooLong
from gateway.codecs.files import decode_file
from gateway.codecs.pyav import CodecUnavailable, load_av

RETIRE_AFTER_GROWTH = 0.5  # of the memory allowance, kept after a file: start afresh


def address_space_bytes() -> int | None:
    """This process's mapped address space (what RLIMIT_AS counts), where /proc tells it."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def limit_memory(memory_mb: int) -> int | None:
    """Cap the address space at its present size plus ``memory_mb``; the loaded
    size (bytes), or None where it cannot be measured or the cap cannot be set."""
    loaded = address_space_bytes()
    if loaded is None:
        return None
    return loaded if _set_limit(resource.RLIMIT_AS, loaded + memory_mb * 1024 * 1024, hard_too=True) else None


def limit_cpu_for_one_file(cpu_s: float) -> bool:
    """Let the next file use ``cpu_s`` more seconds of CPU, then SIGXCPU."""
    return _set_limit(resource.RLIMIT_CPU, math.ceil(cpu_seconds_used() + cpu_s), hard_too=False)


def _set_limit(which: int, value: int, *, hard_too: bool) -> bool:
    """Set the soft limit ``which`` (with ``hard_too`` the hard one as well) to
    ``value``, held under the present hard limit; False where it cannot be set."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        resource.setrlimit(which, (value, value if hard_too else hard))
    except (ValueError, OSError):
        return False
    return True


def decode_one(header: dict[str, Any], data: bytes) -> tuple[dict[str, Any], np.ndarray | None]:
    """One request -> its reply (header, samples); every failure is a reply."""
    try:
        decoded = decode_file(data, int(header["rate"]), float(header["max_s"]))
    except AudioTooLong as exc:
        return {"ok": False, "code": "too_long", "message": str(exc)}, None
    except AudioFormatError as exc:
        return {"ok": False, "code": "bad_audio", "message": str(exc)}, None
    except CodecUnavailable as exc:
        return {"ok": False, "code": "codec_unavailable", "message": exc.message}, None
    except MemoryError:
        return {"ok": False, "code": "memory", "message": "out of memory", "retire": True}, None
    except Exception as exc:  # a decoder bug must answer this file, not end the process unexplained
        return {"ok": False, "code": "unexpected", "message": f"{type(exc).__name__}: {exc}"}, None
    reply = {"ok": True, "source_rate": decoded.source_rate, "container": decoded.container, "codec": decoded.codec}
    return reply, np.ascontiguousarray(decoded.samples, dtype="<f4")


def write_reply(stdout: BinaryIO, header: dict[str, Any], samples: np.ndarray | None) -> None:
    """The header line, then the samples straight from their buffer (no copy of up to 58 MB)."""
    size = 0 if samples is None else samples.nbytes
    stdout.write(encode_frame({**header, "len": size} if size else header))
    if samples is not None and size:
        stdout.write(samples.data.cast("B"))
    stdout.flush()


def serve(stdin: BinaryIO, stdout: BinaryIO, memory_mb: int, cpu_s: float) -> int:
    with contextlib.suppress(CodecUnavailable):  # without PyAV, WAV still decodes; other files get codec_unavailable
        load_av()  # loaded before the memory cap is measured, so FFmpeg's libraries are not counted against a file
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a file that kills this process leaves no core dump behind
    loaded = limit_memory(memory_mb)
    enforced = (["memory"] if loaded is not None else []) + (["cpu"] if limit_cpu_for_one_file(cpu_s) else [])
    write_frame(stdout, {"ready": True, "address_space_mb": (loaded or 0) // (1024 * 1024), "enforced": enforced})
    while True:
        try:
            frame = read_frame(stdin)
        except FrameError as exc:
            write_frame(stdout, {"ok": False, "code": "unexpected", "message": str(exc), "retire": True})
            return 1
        if frame is None:
            return 0
        limit_cpu_for_one_file(cpu_s)
        reply, samples = decode_one(*frame)
        del frame  # the file's bytes: room for the next
        grown = address_space_bytes()
        retire = bool(reply.get("retire")) or (
            loaded is not None and grown is not None and grown - loaded > RETIRE_AFTER_GROWTH * memory_mb * 2**20)
        write_reply(stdout, {**reply, "retire": retire}, samples)
        if retire:
            return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.codecs.decode_worker", description=__doc__.split("\n")[0])
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-s", type=float, required=True)
    args = parser.parse_args(argv)
    return serve(sys.stdin.buffer, sys.stdout.buffer, args.memory_mb, args.cpu_s)


if __name__ == "__main__":
    sys.exit(main())
