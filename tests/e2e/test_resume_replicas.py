"""Resume behind a real load balancer: two real `voxgate serve` replicas (real
ASR sidecar, tiny.en) named by ``VOXGATE_REPLICA_ID``, behind the real haproxy
of docs/deployment.md (tests/support/haproxy.py), and a relay between the
client and the balancer that cuts the path mid-utterance
(tests/support/cut_relay.py), all on 127.0.0.1.

While the path is cut, a second session of the same replica is dropped and
resumed through the balancer, and kept open: the replica then holds the one
connection of the balancer's ``resumes`` backend, so a balancer that ignored the
token (``leastconn``) would send the client's resume to the other replica. The
resume lands home only because the balancer routes it by the token's prefix."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.client.base import Credentials
from gateway.client.dictation import DictationClient
from gateway.errors import close_reason
from gateway.resume_tokens import token_replica
from tests.e2e.gateway_process import GatewayProcess, running_gateway
from tests.support.cut_relay import CutRelay
from tests.support.haproxy import Haproxy, running_haproxy
from tests.support.speech import piper_say, resample, silence, words

pytestmark = pytest.mark.slow

REPLICAS = ("gw-a", "gw-b")
KEY = "resume-replicas-key-Vb7qL2xN9tR4wM8s"
KEY_HEADERS = {"Authorization": f"Bearer {KEY}"}
FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
BREAK_AT_S = 1.5  # into the first sentence, which starts at 0.5 s
PING_S = 1.0  # how soon the client notices a path that went silent
MAX_TRIES = 4  # new sessions opened through the balancer until one lands on a given replica


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1)


def start_replicas(stack: ExitStack, work: Path) -> dict[str, GatewayProcess]:
    """Both replicas, started at once (their sidecars load in parallel); ``stack`` stops them."""
    # as deployed: server mode, an API key, the balancer a trusted proxy
    env = {"VOXGATE_SERVER_MODE": "1", "VOXGATE_API_KEY": KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32",
           "VOXGATE_ASR_THREADS": "1", "VOXGATE_RESUME_GRACE_S": "30",
           # one client holds several sockets here: the routing, not the per-client share, is under test
           "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": "8"}
    managers = {name: running_gateway(work / name, "asr", env={**env, "VOXGATE_REPLICA_ID": name})
                for name in REPLICAS}
    with ThreadPoolExecutor(len(managers)) as pool:
        starts = {name: pool.submit(manager.__enter__) for name, manager in managers.items()}
    for name, start in starts.items():
        if start.exception() is None:
            stack.push(managers[name].__exit__)
    return {name: start.result() for name, start in starts.items()}  # the first failure, once all are stopped


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[dict[str, GatewayProcess], Haproxy]]:
    work = tmp_path_factory.mktemp("sticky")
    with ExitStack() as stack:
        gateways = start_replicas(stack, work)
        lb = stack.enter_context(running_haproxy(work / "lb", {name: port_of(gw.url) for name, gw in gateways.items()}))
        yield gateways, lb


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    first, rate = piper_say(FIRST, steady=True)
    second, _ = piper_say(SECOND, steady=True)
    return np.concatenate([silence(0.5), resample(first, rate), silence(1.2), resample(second, rate), silence(1.0)])


async def open_socket(lb: Haproxy, query: str) -> tuple[ClientConnection, dict]:
    """A dictation socket through the balancer, and its ``ready``."""
    socket = await connect(ws_url(lb.url) + f"/v1/dictation?{query}", additional_headers=KEY_HEADERS, open_timeout=10)
    ready = json.loads(await asyncio.wait_for(socket.recv(), 30))
    assert ready["type"] == "ready", ready
    return socket, ready


async def end(socket: ClientConnection) -> None:
    """End a session cleanly (a dropped one would be held, and hold up the stop)."""
    await socket.send(json.dumps({"type": "end"}))
    try:
        while True:
            await asyncio.wait_for(socket.recv(), 30)
    except ConnectionClosed:
        pass


async def resumed_at_home(lb: Haproxy, home: str, held: list[ClientConnection]) -> None:
    """Another session on ``home``, dropped and resumed through the balancer, its
    socket kept open in ``held``: ``home`` then holds one connection of the
    balancer's ``resumes`` backend and the other replica none, so a resume that
    the balancer did not route by its token would go to the other one (leastconn)."""
    elsewhere: list[ClientConnection] = []
    for _ in range(MAX_TRIES):
        socket, ready = await open_socket(lb, "resumable=true")
        if token_replica(ready["resume_token"]) == home:
            break
        elsewhere.append(socket)  # kept open meanwhile: the next new session goes to the other replica
    else:
        raise AssertionError(f"the balancer sent no new session to {home} in {MAX_TRIES}")
    for other in elsewhere:
        await end(other)
    await socket.close()  # closed without ``end``: a drop; the session is held
    resumed, ready = await open_socket(lb, f"resume={ready['resume_token']}&last_seq=0")
    held.append(resumed)
    assert ready["resumed"] is True and token_replica(ready["resume_token"]) == home


async def direct_refusal(gateway: GatewayProcess, token: str) -> tuple[dict, tuple[int, str]]:
    async with connect(ws_url(gateway.url) + f"/v1/dictation?resume={token}&last_seq=0",
                       additional_headers=KEY_HEADERS, open_timeout=10) as socket:
        event = json.loads(await asyncio.wait_for(socket.recv(), 30))
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(socket.recv(), 30)
    assert info.value.rcvd is not None
    return event, (info.value.rcvd.code, info.value.rcvd.reason)


async def test_a_resume_through_the_balancer_goes_on_at_its_replica_and_nowhere_else(cluster, audio):
    gateways, lb = cluster
    relay = CutRelay("127.0.0.1", port_of(lb.url))
    await relay.start()
    held: list[ClientConnection] = []
    cuts: list[asyncio.Task[None]] = []
    try:
        client = await DictationClient.connect(relay.url, resume=True, ping_s=PING_S, credentials=Credentials(KEY))
        home = token_replica(client.ready["resume_token"])
        assert home in REPLICAS

        def on_chunk_sent(sent_s: float) -> None:
            if sent_s >= BREAK_AT_S and not cuts:
                cuts.append(asyncio.create_task(relay.cut_during(lambda: resumed_at_home(lb, home, held))))

        async with client:
            async def send() -> None:
                await client.stream_samples(audio, realtime=True, on_chunk_sent=on_chunk_sent)
                await client.end()

            sender = asyncio.create_task(send())
            events = [event async for event in client.events()]
            await sender
        await cuts[0]
        for socket in held:
            await end(socket)
    finally:
        for socket in held:
            await socket.close()
        await relay.aclose()

    assert (client.resumes, client.close_code, relay.connections) == (1, 1000, 2)
    assert client.resume is not None and token_replica(client.resume.token) == home
    assert [e["seq"] for e in events if "seq" in e] == list(range(1, len(events) + 1))  # none missed, none twice
    assert events[-1]["type"] == "closed"
    assert [words(e["text"]) for e in events if e["type"] == "final"] == [words(FIRST), words(SECOND)]

    other = next(name for name in REPLICAS if name != home)
    message = (f"that resume token belongs to replica {home!r}, this is {other!r}: the load balancer must send each "
               "resume to the replica named before the first '.' of its token (docs/deployment.md)")
    event, close = await direct_refusal(gateways[other], client.resume.token)
    assert event == {"type": "error", "code": "resume_elsewhere", "message": message, "retryable": False}
    assert close == (4421, close_reason(message))
