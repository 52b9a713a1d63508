"""The sidecar's wire format: one JSON header line, then ``len`` raw payload bytes.

    {"op": "audio", "stream": "s1", "len": 6400}\\n<6400 bytes of f32le PCM>

A header without ``len`` (or ``len: 0``) has no payload. Headers are bounded so
a corrupt stream is detected at once instead of being buffered without end.
Audio payloads are mono float32 little-endian at 16 kHz.

Both ends use this module: the sidecar reads and writes blocking binary files
(``read_frame`` / ``write_frame``), the gateway uses asyncio streams
(``read_frame_async`` / ``encode_frame``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, BinaryIO

import numpy as np

MAX_HEADER_BYTES = 64 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024  # a 30-minute file for /v1/audio/transcriptions
SAMPLE_RATE = 16000  # the recognizer's rate: every payload and sample position on the pipe is at it


class FrameError(ValueError):
    """The byte stream does not hold a valid frame (the peer is broken)."""


class FrameRejected(FrameError):
    """One frame could not be used, but it was read to its end: the stream is
    still in step and the next frame can be read. ``header`` is the frame's
    header when it could be parsed (to answer the stream or request it names)."""

    def __init__(self, message: str, header: dict[str, Any] | None = None, code: str = "bad_request") -> None:
        super().__init__(message)
        self.header = header or {}
        self.code = code


def encode_frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """One frame as bytes, ready for a single write (so frames never interleave)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise FrameError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    if payload:
        header = {**header, "len": len(payload)}
    line = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(line) >= MAX_HEADER_BYTES:
        raise FrameError(f"frame header of {len(line)} bytes exceeds {MAX_HEADER_BYTES}")
    return line + b"\n" + payload


def _parse_header(line: bytes) -> tuple[dict[str, Any], int]:
    try:
        header = json.loads(line)
    except RecursionError:
        raise FrameError("frame header is nested too deeply") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError("frame header is not a JSON object")
    length = header.get("len", 0)
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise FrameError(f"frame payload length {length!r} is invalid")
    if length > MAX_PAYLOAD_BYTES:
        raise FrameRejected(f"frame payload of {length} bytes exceeds {MAX_PAYLOAD_BYTES}", header, "too_large")
    return header, length


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """Read one frame from a blocking binary stream; None at a clean end of stream.

    A frame that cannot be used but whose end is known (a header that is not a
    JSON object ends at its newline; an oversize payload has its length) is
    read to that end and raised as ``FrameRejected``, so the caller can answer
    it and read on. Other ``FrameError``s leave the stream out of step.
    """
    line = stream.readline(MAX_HEADER_BYTES)
    if not line:
        return None
    if not line.endswith(b"\n"):
        if len(line) < MAX_HEADER_BYTES:
            raise FrameError("frame header is truncated")
        _skip_line(stream)
        raise FrameRejected(f"frame header exceeds {MAX_HEADER_BYTES} bytes")
    try:
        header, length = _parse_header(line)
    except FrameRejected as exc:
        _skip(stream, int(exc.header["len"]))
        raise
    except FrameError as exc:
        raise FrameRejected(str(exc)) from None
    payload = stream.read(length) if length else b""
    if len(payload) != length:
        raise FrameError(f"frame payload truncated ({len(payload)} of {length} bytes)")
    return header, payload


def _skip(stream: BinaryIO, length: int) -> None:
    """Read and drop ``length`` bytes a chunk at a time (never held whole)."""
    while length > 0:
        chunk = stream.read(min(length, 1 << 20))
        if not chunk:
            raise FrameError("stream ended inside a rejected frame's payload")
        length -= len(chunk)


def _skip_line(stream: BinaryIO) -> None:
    while True:
        chunk = stream.readline(MAX_HEADER_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def write_frame(stream: BinaryIO, header: dict[str, Any], payload: bytes = b"") -> None:
    stream.write(encode_frame(header, payload))
    stream.flush()


async def read_frame_async(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes] | None:
    """Read one frame from an asyncio stream; None at a clean end of stream."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("stream ended inside a frame header") from None
    except asyncio.LimitOverrunError:
        raise FrameError("frame header is too long") from None
    header, length = _parse_header(line)
    try:
        payload = await reader.readexactly(length) if length else b""
    except asyncio.IncompleteReadError:
        raise FrameError("stream ended inside a frame payload") from None
    return header, payload


def pcm_to_bytes(samples: np.ndarray) -> bytes:
    return np.ascontiguousarray(samples, dtype="<f4").tobytes()


def pcm_from_bytes(payload: bytes) -> np.ndarray:
    if len(payload) % 4:
        raise FrameError(f"audio payload of {len(payload)} bytes is not whole float32 samples")
    return np.frombuffer(payload, dtype="<f4").astype(np.float32)


def samples(seconds: float) -> int:
    """``seconds`` of audio as a sample count at ``SAMPLE_RATE``."""
    return round(seconds * SAMPLE_RATE)


def header_prompt(header: dict[str, Any]) -> str:
    """The ``prompt`` of an ``open``, ``configure`` or ``transcribe`` frame (the gateway validated it)."""
    prompt = header.get("prompt") or ""
    if not isinstance(prompt, str):
        raise ValueError("prompt must be a string")
    return prompt


def header_terms(header: dict[str, Any]) -> tuple[str, ...]:
    """The ``terms`` of an ``open``, ``configure`` or ``transcribe`` frame (the gateway validated them)."""
    terms = header.get("terms") or []
    if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
        raise ValueError("terms must be a list of strings")
    return tuple(terms)
