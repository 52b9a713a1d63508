"""Wyoming framing: one event is a JSON header line, then optional JSON data
bytes, then optional raw payload bytes::

    {"type": "...", "version": "1.5.3", "data_length": N, "payload_length": M}\\n
    <N bytes: a JSON object, merged into the header's own "data">
    <M bytes: payload (PCM audio)>

Older peers put ``data`` in the header line itself; both forms are read, and
this server writes the current one (data after the line). Every length is
bounded, so a peer cannot make the server buffer without limit.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from gateway.protocol.json import json_object

# The protocol version this front speaks (the ``wyoming`` package it was checked against).
PROTOCOL_VERSION = "1.10.2"
MAX_LINE_BYTES = 64 * 1024
MAX_DATA_BYTES = 1024 * 1024
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024  # ~2 min of 16 kHz 16-bit mono in one audio-chunk


class WireError(ValueError):
    """The byte stream is not Wyoming (or breaks a limit); the connection cannot go on."""


@dataclass(frozen=True)
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""


def encode_event(event: Event) -> bytes:
    """The bytes of one event, ready to write."""
    header: dict[str, Any] = {"type": event.type, "version": PROTOCOL_VERSION}
    data = json.dumps(event.data, ensure_ascii=False).encode("utf-8") if event.data else b""
    if data:
        header["data_length"] = len(data)
    if event.payload:
        header["payload_length"] = len(event.payload)
    return json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n" + data + event.payload


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event, or None at a clean end of stream. Raises ``WireError``."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise WireError("the connection ended in the middle of an event header") from None
    except asyncio.LimitOverrunError:
        raise WireError(f"an event header line is longer than {MAX_LINE_BYTES} bytes") from None
    if not line.strip():
        raise WireError("empty event header line")
    header = _json_object(line, "the event header")
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise WireError("the event header has no \"type\" string")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise WireError(f"{kind}: \"data\" must be a JSON object")
    data_length = _length(header, "data_length", MAX_DATA_BYTES, kind)
    payload_length = _length(header, "payload_length", MAX_PAYLOAD_BYTES, kind)
    try:
        if data_length:
            data = {**data, **_json_object(await reader.readexactly(data_length), f"{kind}: the data")}
        payload = await reader.readexactly(payload_length) if payload_length else b""
    except asyncio.IncompleteReadError:
        raise WireError(f"{kind}: the connection ended before the announced data or payload") from None
    return Event(kind, data, payload)


def _length(header: dict[str, Any], name: str, limit: int, kind: str) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WireError(f"{kind}: \"{name}\" must be a non-negative integer")
    if value > limit:
        raise WireError(f"{kind}: \"{name}\" {value} is over the limit of {limit} bytes")
    return value


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    return json_object(raw, WireError, f"{what} is", f"{what} is not a JSON object")
