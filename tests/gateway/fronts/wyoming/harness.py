"""A Wyoming listener in the test's own event loop, over fakes, and a client of
the real ``wyoming`` package to talk to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np
from wyoming.client import AsyncTcpClient
from wyoming.event import Event

from engines.base import AsrService, TtsEngine
from gateway.config import Settings
from gateway.fronts.wyoming.server import WyomingServer
from gateway.registry import SessionRegistry
from tests.support.fake_sidecar import FakeSidecar

READ_TIMEOUT_S = 10.0
RATE = 16000  # of the audio the transcription tests send
VERSION = "0.0.test"  # what the app would pass in: its own version


@contextlib.asynccontextmanager
async def wyoming_server(tmp_path: Any, *, tts: Mapping[str, TtsEngine] | None = None,
                         asr: AsrService | None = None, **overrides: Any) -> AsyncIterator[WyomingServer]:
    """Start a WyomingServer on a free loopback port over ``tts`` and ``asr``."""
    overrides.setdefault("tts_engine", "pocket")
    settings = Settings(data_dir=tmp_path, wyoming_uri="tcp://127.0.0.1:0", **overrides)
    sessions = SessionRegistry.for_settings(settings)
    if asr is not None:
        await asr.start()
    state = {"settings": settings, "tts": dict(tts or {}), "asr": asr, "sessions": sessions}
    server = WyomingServer(settings, state, version=VERSION, lan_ipv4=lambda: "192.0.2.7")
    await server.start()
    try:
        yield server
    finally:
        await server.aclose()


@contextlib.asynccontextmanager
async def connect(server: WyomingServer) -> AsyncIterator[AsyncTcpClient]:
    client = AsyncTcpClient("127.0.0.1", server.port)
    await client.connect()
    try:
        yield client
    finally:
        await client.disconnect()


async def read(client: AsyncTcpClient) -> Event | None:
    return await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)


async def read_until(client: AsyncTcpClient, last: str) -> list[Event]:
    """Events up to and including the first of type ``last``."""
    events = []
    while True:
        event = await read(client)
        assert event is not None, f"connection closed before {last}; got {[e.type for e in events]}"
        events.append(event)
        if event.type == last:
            return events


def brief(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """(type, data) of each event but audio chunks, which are summed up."""
    return [(e.type, e.data) for e in events if e.type != "audio-chunk"]


def sessions_of(server: WyomingServer) -> list[dict[str, Any]]:
    registry: SessionRegistry = server.state["sessions"]
    return registry.list()


async def the_stream(fake: FakeSidecar) -> Any:
    """The one ASR stream a connection opened on ``fake``."""
    for _ in range(500):
        if fake.streams:
            return fake.the_stream()
        await asyncio.sleep(0.01)
    raise AssertionError("no ASR stream was opened")



def pcm(samples: np.ndarray) -> bytes:
    return bytes((samples * 32768).astype("<i2").tobytes())
