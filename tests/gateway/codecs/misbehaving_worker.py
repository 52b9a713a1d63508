"""The real decoder process (gateway/codecs/decode_worker.py, its limits
included) with three test files it handles on its own, so the pool's answers
to a decoder that spins, hangs or crashes can be shown with the kernel's real
limits and signals: ``SPIN`` burns CPU until RLIMIT_CPU ends it, ``HANG``
sleeps without using CPU, ``ABORT`` dies by SIGABRT, and a file behind
``UNCHECKED`` is decoded without the MP4 sample-table check, so the address-space
cap is all that stands between FFmpeg and the file's claims; one behind ``LEAK``
is decoded after 160 MB are taken and kept, as a heap left grown by a file would
be. Run as
``python -m tests.gateway.codecs.misbehaving_worker`` (the pool's ``module``)."""

from __future__ import annotations

import os
import sys
import time

from gateway.codecs import decode_worker, files
from gateway.codecs.files import DecodedFile

real_decode_file = decode_worker.decode_file
kept: list[bytearray] = []


def misbehaving_decode_file(data: bytes, out_rate: int, max_duration_s: float) -> DecodedFile:
    if data.startswith(b"SPIN"):
        while True:
            pass
    if data.startswith(b"HANG"):
        time.sleep(3600)
    if data.startswith(b"ABORT"):
        os.abort()
    if data.startswith(b"LEAK"):
        kept.append(bytearray(160 * 2**20))
        return real_decode_file(data[len(b"LEAK"):], out_rate, max_duration_s)
    if data.startswith(b"UNCHECKED"):
        files.check_sample_tables = lambda data, max_duration_s: None  # type: ignore[assignment]
        return real_decode_file(data[len(b"UNCHECKED"):], out_rate, max_duration_s)
    return real_decode_file(data, out_rate, max_duration_s)


if __name__ == "__main__":
    decode_worker.decode_file = misbehaving_decode_file  # type: ignore[assignment]
    sys.exit(decode_worker.main())
