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
SAMPLE_RATE = 16000


class FrameError(ValueError):
    """The byte stream does not hold a valid frame (the peer is broken)."""


def encode_frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """One frame as bytes, ready for a single write (so frames never interleave)."""
    if payload:
        header = {**header, "len": len(payload)}
    line = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(line) >= MAX_HEADER_BYTES:
        raise FrameError(f"frame header of {len(line)} bytes exceeds {MAX_HEADER_BYTES}")
    return line + b"\n" + payload


def _parse_header(line: bytes) -> tuple[dict[str, Any], int]:
    try:
        header = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError("frame header is not a JSON object")
    length = header.get("len", 0)
    if not isinstance(length, int) or not 0 <= length <= MAX_PAYLOAD_BYTES:
        raise FrameError(f"frame payload length {length!r} is invalid")
    return header, length


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """Read one frame from a blocking binary stream; None at a clean end of stream."""
    line = stream.readline(MAX_HEADER_BYTES)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise FrameError("frame header is too long or truncated")
    header, length = _parse_header(line)
    payload = stream.read(length) if length else b""
    if len(payload) != length:
        raise FrameError(f"frame payload truncated ({len(payload)} of {length} bytes)")
    return header, payload


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
