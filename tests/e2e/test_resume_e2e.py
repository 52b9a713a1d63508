"""Resume end to end: the real client and a real `voxgate serve` (real ASR
sidecar, tiny.en) with a relay between them that breaks the path mid-utterance
(tests/support/cut_relay.py), on real speech (Piper with its noise off, so the
words are the same every run). The finals after a resume are word for word
those of an uncut run, every event arrives once and in order, and events come
after the reconnect."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import numpy as np
import pytest

from gateway.cli.transcribe import transcribe
from gateway.client.dictation import DictationClient
from tests.e2e.gateway_process import running_gateway
from tests.support.cut_relay import CutRelay
from tests.support.speech import piper_say, resample, silence, words
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
BREAK_AT_S = 1.5  # into the first sentence, which starts at 0.5 s
PING_S = 1.0  # how soon the client notices a path that went silent

Breaker = Callable[[CutRelay], Awaitable[None]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_RESUME_GRACE_S": "30"}
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env=env) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    first, rate = piper_say(FIRST, steady=True)
    second, _ = piper_say(SECOND, steady=True)
    return np.concatenate([silence(0.5), resample(first, rate), silence(1.2), resample(second, rate), silence(1.0)])


async def run_through(url: str, audio: np.ndarray, breaker: Breaker | None) -> tuple[list[dict], DictationClient]:
    """The events of one session through a fresh relay, broken at BREAK_AT_S of sent audio."""
    port = int(url.rsplit(":", 1)[1])
    relay = CutRelay("127.0.0.1", port)
    await relay.start()
    breaking: list[asyncio.Task[None]] = []

    def on_chunk_sent(sent_s: float) -> None:
        if breaker is not None and sent_s >= BREAK_AT_S and not breaking:
            breaking.append(asyncio.create_task(breaker(relay)))

    try:
        client = await DictationClient.connect(relay.url, resume=True, ping_s=PING_S)
        async with client:
            async def send() -> None:
                await client.stream_samples(audio, realtime=True, on_chunk_sent=on_chunk_sent)
                await client.end()

            sender = asyncio.create_task(send())
            events = []
            async for event in client.events():
                events.append({**event, "_at": time.monotonic()})
            await sender
        await asyncio.gather(*breaking)
    finally:
        await relay.aclose()
    return events, client


def finals_words(events: list[dict]) -> list[list[str]]:
    return [words(e["text"]) for e in events if e["type"] == "final"]


async def cut_for(seconds: float, relay: CutRelay) -> None:
    await relay.cut(seconds)


async def stall(relay: CutRelay) -> None:
    relay.stall()


@pytest.fixture(scope="module")
def uncut(server, audio):
    events, client = asyncio.run(run_through(server, audio, None))
    assert client.resumes == 0 and client.close_code == 1000
    assert len(finals_words(events)) == 2, events
    return finals_words(events)


@pytest.mark.parametrize("breaker", [
    pytest.param(lambda relay: cut_for(0.5, relay), id="cut-0.5s"),
    pytest.param(lambda relay: cut_for(2.0, relay), id="cut-2s"),
    # 5 s: well within the 30 s grace and the client's 30 s reconnect window; the
    # audio streamed meanwhile (the rest of the first sentence, on into the second)
    # is kept by the client and sent again
    pytest.param(lambda relay: cut_for(5.0, relay), id="cut-5s"),
    pytest.param(stall, id="stalled-without-a-close"),
])
async def test_the_finals_after_a_resume_are_those_of_an_uncut_run(server, audio, uncut, breaker):
    events, client = await run_through(server, audio, breaker)
    assert client.resumes == 1
    assert client.close_code == 1000
    assert [e["seq"] for e in events if "seq" in e] == list(range(1, len(events) + 1))  # once each, in order
    assert events[-1]["type"] == "closed"
    assert finals_words(events) == uncut
    assert client.resumed_at is not None
    assert any(e["_at"] >= client.resumed_at for e in events)  # the session went on after the reconnect


async def test_voxgate_transcribe_survives_a_cut(server, audio, uncut, capsys):
    port = int(server.rsplit(":", 1)[1])
    relay = CutRelay("127.0.0.1", port)
    await relay.start()
    args = argparse.Namespace(json=False, no_interim=True, word_timestamps=False, language=None, silence_ms=None,
                              chunk_ms=100, fast=False, no_resume=False, term=None)
    try:
        run = asyncio.create_task(transcribe(relay.url, audio, 16000, args))
        await eventually(lambda: relay.upstream_bytes >= BREAK_AT_S * 32000, "a second and a half of audio sent")
        await relay.cut(2.0)
        assert await asyncio.wait_for(run, 120) == 0
    finally:
        await relay.aclose()
    lines = capsys.readouterr().out.splitlines()
    assert [words(line.split("] ", 1)[1]) for line in lines] == uncut
    assert relay.connections == 2
