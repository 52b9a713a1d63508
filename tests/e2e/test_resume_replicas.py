"""Resume behind a real load balancer: two real `voxgate serve` replicas (real
ASR sidecar, tiny.en) named by ``VOXGATE_REPLICA_ID``, behind the real haproxy
of docs/deployment.md (tests/support/haproxy.py), and a relay between the
client and the balancer that cuts the path mid-utterance
(tests/support/cut_relay.py), all on 127.0.0.1.

While the path is cut, the token's replica is given one more of the balancer's
connections than the other one, so a balancer that ignored the token
(``leastconn``) would send the resume to the other replica: the resume lands
home only because the balancer routes it by the token's prefix."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from gateway.client.base import Credentials
from gateway.client.dictation import DictationClient
from gateway.dictation.resume import token_replica
from gateway.errors import close_reason
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
MAX_BALLAST = 4  # sessions opened through the balancer until one lands on the token's replica


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://", 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[tuple[dict[str, GatewayProcess], Haproxy]]:
    work = tmp_path_factory.mktemp("sticky")
    # as deployed: server mode, an API key, the balancer a trusted proxy
    env = {"VOXGATE_SERVER_MODE": "1", "VOXGATE_API_KEY": KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32",
           "VOXGATE_ASR_THREADS": "1", "VOXGATE_RESUME_GRACE_S": "30",
           # one client holds several sockets here: the routing, not the per-client share, is under test
           "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": "8"}
    with ExitStack() as stack:
        gateways = {name: stack.enter_context(running_gateway(work / name, "asr",
                                                              env={**env, "VOXGATE_REPLICA_ID": name}))
                    for name in REPLICAS}
        lb = stack.enter_context(running_haproxy(work / "lb", {name: port_of(gw.url) for name, gw in gateways.items()}))
        yield gateways, lb


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    first, rate = piper_say(FIRST, steady=True)
    second, _ = piper_say(SECOND, steady=True)
    return np.concatenate([silence(0.5), resample(first, rate), silence(1.2), resample(second, rate), silence(1.0)])


async def open_resumable(lb: Haproxy) -> tuple[ClientConnection, str]:
    """A resumable session through the balancer, and the replica its token names."""
    socket = await connect(ws_url(lb.url) + "/v1/dictation?resumable=true", additional_headers=KEY_HEADERS,
                           open_timeout=10)
    ready = json.loads(await asyncio.wait_for(socket.recv(), 30))
    replica = token_replica(ready["resume_token"])
    assert replica in REPLICAS, ready
    return socket, replica


async def outweigh(lb: Haproxy, home: str, ballast: list[ClientConnection]) -> list[str]:
    """Leave ``home`` one session through the balancer and the other replica none:
    open sessions until one lands home, then end those that landed elsewhere.
    Where each landed."""
    landed: list[str] = []
    while home not in landed:
        assert len(landed) < MAX_BALLAST, f"the balancer never sent a session to {home}: {landed}"
        socket, replica = await open_resumable(lb)
        ballast.append(socket)
        landed.append(replica)
    for socket, replica in zip(list(ballast), landed, strict=True):
        if replica != home:
            await end(socket)
            ballast.remove(socket)
    return landed


async def end(socket: ClientConnection) -> None:
    """End a ballast session cleanly (a dropped one would be held, and hold up the stop)."""
    await socket.send(json.dumps({"type": "end"}))
    try:
        while True:
            await asyncio.wait_for(socket.recv(), 30)
    except ConnectionClosed:
        pass


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
    ballast: list[ClientConnection] = []
    cuts: list[asyncio.Task[list[str]]] = []
    try:
        client = await DictationClient.connect(relay.url, resume=True, ping_s=PING_S, credentials=Credentials(KEY))
        home = token_replica(client.ready["resume_token"])
        assert home in REPLICAS

        def on_chunk_sent(sent_s: float) -> None:
            if sent_s >= BREAK_AT_S and not cuts:
                cuts.append(asyncio.create_task(relay.cut_during(lambda: outweigh(lb, home, ballast))))

        async with client:
            async def send() -> None:
                await client.stream_samples(audio, realtime=True, on_chunk_sent=on_chunk_sent)
                await client.end()

            sender = asyncio.create_task(send())
            events = [event async for event in client.events()]
            await sender
        landed = await cuts[0]
        for socket in ballast:
            await end(socket)
    finally:
        for socket in ballast:
            await socket.close()
        await relay.aclose()

    assert landed[-1] == home and landed.count(home) == 1  # leastconn alone would send the resume elsewhere
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
