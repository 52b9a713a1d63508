"""Replicas behind a real load balancer with shared auth state: a real
redis-server, two real `voxgate serve` processes (server mode, an API key,
the auth state in that Redis) and a real haproxy in front, all on 127.0.0.1.

The client is remote for the gateways: it sends ``X-Forwarded-For:
198.51.100.x``, which the trusted proxy (haproxy's appended header, or the
client itself when it talks to a replica directly) hands through, so every
request is judged as a remote client's."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.e2e.gateway_process import GatewayProcess, running_gateway
from tests.support.haproxy import Haproxy, running_haproxy
from tests.support.net import free_port
from tests.support.redis_server import RedisServer, running_redis

pytestmark = pytest.mark.slow

KEY = "replica-test-key-Qm3vX8pL2wR7tN4s"
KEY_HEADERS = {"Authorization": f"Bearer {KEY}"}
REFUSED = (1008, "API key required")
STORE_DOWN = {"detail": "authentication store unavailable", "code": "auth_store_unavailable"}


@dataclass
class Cluster:
    redis: RedisServer
    a: GatewayProcess
    b: GatewayProcess
    lb: Haproxy


def start_cluster(stack: ExitStack, work: Path, engines: str) -> Cluster:
    redis = stack.enter_context(running_redis(work / "redis"))
    env = {"VOXGATE_SERVER_MODE": "1", "VOXGATE_API_KEY": KEY, "VOXGATE_FORWARDED_ALLOW_IPS": "127.0.0.1/32",
           "VOXGATE_REDIS_URL": redis.url, "VOXGATE_ASR_THREADS": "1", "VOXGATE_SHARE_HOST": "127.0.0.1",
           "VOXGATE_DRAIN_S": "5",
           # one client holds several sockets here: the balancing, not the per-client share, is under test
           "VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": "8"}
    a = stack.enter_context(running_gateway(work / "a", engines, env={**env, "VOXGATE_SHARE_PORT": str(free_port())}))
    b = stack.enter_context(running_gateway(work / "b", engines, env={**env, "VOXGATE_SHARE_PORT": str(free_port())}))
    lb = stack.enter_context(running_haproxy(work / "lb", [port_of(a.url), port_of(b.url)]))
    return Cluster(redis, a, b, lb)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with ExitStack() as stack:
        yield start_cluster(stack, tmp_path_factory.mktemp("cluster"), "asr")


def remote(ip: str, **headers: str) -> dict[str, str]:
    return {"X-Forwarded-For": ip, **headers}


def mint_ticket(url: str, ip: str, path: str = "/v1/dictation") -> str:
    r = httpx.post(url + "/v1/auth/ticket", json={"path": path}, headers=remote(ip, **KEY_HEADERS))
    assert r.status_code == 201, r.text
    return r.json()["ticket"]


def open_socket(url: str, path: str, ip: str, **headers: str) -> tuple[str, dict | tuple[int, str]]:
    """Open a socket: ("ready", the ready event) or ("closed", (code, reason))."""
    ws_url = url.replace("http://", "ws://", 1) + path
    with connect(ws_url, additional_headers=remote(ip, **headers), open_timeout=10) as ws:
        try:
            while True:
                event = json.loads(ws.recv(timeout=30))
                if event.get("type") == "ready":
                    ws.send(json.dumps({"type": "end"}))
                    return "ready", event
        except ConnectionClosed as exc:
            return "closed", (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else (None, "")


def dictation_sessions(gateway: GatewayProcess) -> int:
    listing = httpx.get(gateway.url + "/v1/admin/sessions", headers=KEY_HEADERS).json()["sessions"]
    return sum(1 for s in listing if s["kind"] == "dictation")


def test_a_ticket_minted_on_one_replica_opens_one_socket_on_the_other(cluster):
    ticket = mint_ticket(cluster.a.url, "198.51.100.10")
    state, ready = open_socket(cluster.b.url, f"/v1/dictation?ticket={ticket}", "198.51.100.10")
    assert (state, ready["type"], ready["model"]) == ("ready", "ready", "tiny.en")
    # used up everywhere: on the replica that minted it, on the one that took it, through the balancer
    for url in (cluster.a.url, cluster.b.url, cluster.lb.url):
        assert open_socket(url, f"/v1/dictation?ticket={ticket}", "198.51.100.10") == ("closed", REFUSED)


def test_tickets_through_the_balancer_open_once_wherever_they_land(cluster):
    tickets = [mint_ticket(cluster.lb.url, "198.51.100.11") for _ in range(8)]
    assert [open_socket(cluster.lb.url, f"/v1/dictation?ticket={t}", "198.51.100.11")[0] for t in tickets] == \
        ["ready"] * 8
    assert [open_socket(cluster.lb.url, f"/v1/dictation?ticket={t}", "198.51.100.11") for t in tickets] == \
        [("closed", REFUSED)] * 8


def test_a_session_revoked_on_one_replica_is_refused_on_the_other_at_once(cluster):
    ip = "198.51.100.12"
    r = httpx.post(cluster.a.url + "/v1/auth/session", json={"transport": "bearer"}, headers=remote(ip, **KEY_HEADERS))
    token = r.json()["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(cluster.b.url + "/v1/engines", headers=remote(ip, **bearer)).status_code == 200
    assert httpx.request("DELETE", cluster.b.url + "/v1/auth/session", headers=remote(ip, **bearer)).status_code == 204
    r = httpx.get(cluster.a.url + "/v1/engines", headers=remote(ip, **bearer))
    assert (r.status_code, r.json()) == (401, {"detail": "API key required", "code": "api_key_required"})
    assert open_socket(cluster.a.url, "/v1/dictation", ip, **bearer) == ("closed", REFUSED)


def test_failed_attempts_lock_a_client_out_on_every_replica(cluster):
    ip, wrong = "198.51.100.13", {"X-API-Key": "not-the-key"}
    for url in (cluster.a.url, cluster.b.url) * 5:  # ten failures, half on each replica
        assert httpx.get(url + "/v1/engines", headers=remote(ip, **wrong)).status_code == 401
    for url in (cluster.a.url, cluster.b.url, cluster.lb.url):
        r = httpx.get(url + "/v1/engines", headers=remote(ip, **KEY_HEADERS))  # even the right key now
        assert (r.status_code, r.json()["code"]) == (429, "too_many_attempts")
        assert 1 <= int(r.headers["retry-after"]) <= 60
    assert httpx.get(cluster.b.url + "/v1/engines", headers=remote("198.51.100.14", **KEY_HEADERS)).status_code == 200


def test_an_ipv6_address_and_its_block_are_locked_out_apart_on_every_replica(cluster):
    wrong = {"X-API-Key": "not-the-key"}

    def status(url: str, ip: str, headers: dict[str, str]) -> int:
        return httpx.get(url + "/v1/engines", headers=remote(ip, **headers)).status_code

    # one address: ten failures over both replicas lock out that address only
    assert [status(url, "2001:db8:5::1", wrong) for url in (cluster.a.url, cluster.b.url) * 5] == [401] * 10
    assert status(cluster.lb.url, "2001:db8:5::1", KEY_HEADERS) == 429
    assert status(cluster.lb.url, "2001:db8:5::2", KEY_HEADERS) == 200  # its neighbour in the /64 is not
    # the /64: 100 failures from its addresses together (none of them locked out alone) lock out all of it
    codes = [status((cluster.a.url, cluster.b.url)[n % 2], f"2001:db8:5::{16 + n // 9:x}", wrong) for n in range(90)]
    assert codes == [401] * 90
    assert status(cluster.lb.url, "2001:db8:5::ff", KEY_HEADERS) == 429
    assert status(cluster.lb.url, "2001:db8:6::1", KEY_HEADERS) == 200


def test_a_guest_holds_its_cap_of_tickets_over_all_replicas(cluster):
    r = httpx.post(cluster.a.url + "/v1/admin/share", headers=KEY_HEADERS)
    assert r.status_code == 201, r.text
    pin = {"X-Voxgate-Pin": r.json()["pin"]}
    try:
        def mint(url: str, ip: str, headers: dict[str, str]) -> httpx.Response:
            return httpx.post(url + "/v1/auth/ticket", json={"path": "/v1/tts"}, headers=remote(ip, **headers))

        statuses = [mint((cluster.a.url, cluster.b.url)[n % 2], "198.51.100.40", pin).status_code for n in range(100)]
        assert statuses == [201] * 100
        for url in (cluster.a.url, cluster.b.url, cluster.lb.url):
            r = mint(url, "198.51.100.40", pin)
            assert (r.status_code, r.json()) == (429, {
                "detail": "this client holds 100 live tickets, the most it may; revoke some or wait for them to expire",
                "code": "too_many_tokens"})
        assert mint(cluster.b.url, "198.51.100.41", pin).status_code == 201  # another guest has a cap of its own
        assert mint(cluster.b.url, "198.51.100.40", KEY_HEADERS).status_code == 201  # the key holder is no guest
    finally:
        httpx.request("DELETE", cluster.a.url + "/v1/admin/share", headers=KEY_HEADERS)


def test_the_pin_and_its_global_budget_are_shared(cluster):
    r = httpx.post(cluster.a.url + "/v1/admin/share", headers=KEY_HEADERS)
    assert r.status_code == 201, r.text
    pin = r.json()["pin"]
    try:
        assert httpx.get(cluster.b.url + "/v1/engines", headers=remote("198.51.100.20", **{"X-Voxgate-Pin": pin})
                         ).status_code == 200
        status = httpx.get(cluster.b.url + "/v1/admin/share", headers=KEY_HEADERS).json()
        assert (status["enabled"], status["pin"]) == (True, pin)
        # replica a's certificate, kept with the PIN record: b shows the same https link and fingerprint
        assert (status["url"], status["fingerprint"]) == (r.json()["url"], r.json()["fingerprint"])
        assert status["url"].startswith("https://") and len(status["fingerprint"]) == 95
        wrong = "000000" if pin != "000000" else "111111"
        codes = []
        for n in range(100):  # 100 wrong PINs, from 20 addresses (none locked out), over both replicas
            url = (cluster.a.url, cluster.b.url)[n % 2]
            ip = f"198.51.100.{100 + n // 5}"
            codes.append(httpx.get(url + "/v1/engines", headers=remote(ip, **{"X-Voxgate-Pin": wrong})).status_code)
        assert codes == [401] * 100
        for url in (cluster.a.url, cluster.b.url):  # the budget is spent: the PIN is gone everywhere
            r = httpx.get(url + "/v1/engines", headers=remote("198.51.100.21", **{"X-Voxgate-Pin": pin}))
            assert (r.status_code, r.json()["code"]) == (401, "api_key_required")
            assert httpx.get(url + "/v1/admin/share", headers=KEY_HEADERS).json()["enabled"] is False
    finally:
        httpx.request("DELETE", cluster.a.url + "/v1/admin/share", headers=KEY_HEADERS)


def test_redis_never_holds_the_pin_in_clear(tmp_path):
    with ExitStack() as stack:
        cluster = start_cluster(stack, tmp_path, "none")
        r = httpx.post(cluster.a.url + "/v1/admin/share", headers=KEY_HEADERS)
        assert r.status_code == 201, r.text
        pin = r.json()["pin"]
        # replica b checks it, shows it, mints a session from it
        assert httpx.get(cluster.b.url + "/v1/engines", headers=remote("198.51.100.30", **{"X-Voxgate-Pin": pin})
                         ).status_code == 200
        assert httpx.get(cluster.b.url + "/v1/admin/share", headers=KEY_HEADERS).json()["pin"] == pin
        r = httpx.post(cluster.lb.url + "/v1/auth/session", json={"pin": pin, "transport": "bearer"},
                       headers=remote("198.51.100.30"))
        assert r.status_code == 201, r.text
        stored = cluster.redis.stored_strings()
        assert any(s.startswith("voxgate:share") for s in stored)
        assert [s for s in stored if re.search(rf"(?<![0-9]){pin}(?![0-9])", s)] == []


def hold_sockets(stack: ExitStack, lb: str, ip: str, count: int) -> list[str]:
    """Open ``count`` dictation sockets through the balancer and keep them open (until
    ``stack`` closes); the first event of each."""
    firsts = []
    for _ in range(count):
        ticket = mint_ticket(lb, ip)
        ws = stack.enter_context(connect(lb.replace("http://", "ws://") + f"/v1/dictation?ticket={ticket}",
                                         additional_headers=remote(ip), open_timeout=10))
        firsts.append(json.loads(ws.recv(timeout=30))["type"])
    return firsts


def test_the_balancer_spreads_sockets_over_both_replicas(cluster):
    with ExitStack() as sockets:
        assert hold_sockets(sockets, cluster.lb.url, "198.51.100.15", 6) == ["ready"] * 6
        assert (dictation_sessions(cluster.a), dictation_sessions(cluster.b)) == (3, 3)  # leastconn


def test_a_killed_replica_is_left_out_and_new_sessions_land_on_the_other(tmp_path):
    with ExitStack() as stack:
        cluster = start_cluster(stack, tmp_path, "asr")
        cluster.b.proc.send_signal(signal.SIGKILL)
        cluster.b.proc.wait(timeout=10)
        # at once, before a health check noticed: the balancer retries a refused connection on the live replica
        with ExitStack() as sockets:
            assert hold_sockets(sockets, cluster.lb.url, "198.51.100.16", 4) == ["ready"] * 4
            assert dictation_sessions(cluster.a) == 4


def test_redis_killed_fails_closed_for_what_needs_it(tmp_path):
    with ExitStack() as stack:
        cluster = start_cluster(stack, tmp_path, "none")
        ip = "198.51.100.17"
        token = httpx.post(cluster.lb.url + "/v1/auth/session", json={"transport": "bearer"},
                           headers=remote(ip, **KEY_HEADERS)).json()["token"]
        ticket = mint_ticket(cluster.lb.url, ip)
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.get(cluster.lb.url + "/v1/engines", headers=remote(ip, **bearer)).status_code == 200
        cluster.redis.kill()

        for url in (cluster.a.url, cluster.b.url, cluster.lb.url):
            # the API key is served
            assert httpx.get(url + "/v1/engines", headers=remote(ip, **KEY_HEADERS)).status_code == 200
            # a session, no credential, minting: 503 with the exact detail
            for method, path, headers in (("GET", "/v1/engines", bearer), ("GET", "/v1/engines", {}),
                                          ("POST", "/v1/auth/ticket", KEY_HEADERS)):
                r = httpx.request(method, url + path, headers=remote(ip, **headers), json={"path": "/v1/tts"})
                assert (r.status_code, r.json(), r.headers["retry-after"]) == (503, STORE_DOWN, "1"), (url, path)
        # guessing keys is locked out all the same: each replica counts in its own memory meanwhile
        guesser, wrong = "198.51.100.18", [{"X-API-Key": f"guess-{n:02d}-not-the-key-at-all"} for n in range(30)]
        answers = [httpx.get(cluster.a.url + "/v1/engines", headers=remote(guesser, **w)) for w in wrong]
        assert [(r.status_code, r.json()["detail"]) for r in answers] == \
            [(401, "API key required")] * 10 + [(429, "Too many authentication attempts")] * 20
        assert all(1 <= int(r.headers["retry-after"]) <= 60 for r in answers[10:])
        assert httpx.get(cluster.a.url + "/v1/engines", headers=remote(guesser, **KEY_HEADERS)).status_code == 429
        assert httpx.get(cluster.b.url + "/v1/engines", headers=remote(guesser, **wrong[0])).status_code == 401
        # a ticket: the socket closes 1013 (retry) with the detail; the key's socket passes auth
        # (and is refused by the route: this cluster runs no ASR)
        assert open_socket(cluster.lb.url, f"/v1/dictation?ticket={ticket}", ip) == (
            "closed", (1013, "authentication store unavailable"))
        state, (code, reason) = open_socket(cluster.lb.url, "/v1/dictation", ip, **KEY_HEADERS)
        assert (state, code) == ("closed", 1011) and reason == "Speech recognition is not enabled on this gateway"
        # loopback (no forwarded client) is served, readiness stays 200, health says why
        health = httpx.get(cluster.a.url + "/health/ready")
        assert (health.status_code, health.json()["auth_store"]) == (200, "unavailable")
        assert "voxgate_auth_store_up 0" in httpx.get(cluster.a.url + "/metrics", headers=KEY_HEADERS).text

        # Redis back (empty: no persistence): the old session is gone, new ones work everywhere
        cluster.redis = stack.enter_context(running_redis(tmp_path / "redis2", port=cluster.redis.port))
        deadline = time.monotonic() + 10
        for replica in (cluster.a, cluster.b):  # each finds Redis again on its own (stale connections, backoff)
            while httpx.post(replica.url + "/v1/auth/ticket", json={"path": "/v1/tts"},
                             headers=remote(ip, **KEY_HEADERS)).status_code != 201:
                assert time.monotonic() < deadline, f"{replica.url} never used Redis again"
                time.sleep(0.2)
        r = httpx.get(cluster.b.url + "/v1/engines", headers=remote(ip, **bearer))
        assert (r.status_code, r.json()["code"]) == (401, "api_key_required")
        assert open_socket(cluster.b.url, f"/v1/dictation?ticket={mint_ticket(cluster.a.url, ip)}", ip)[1][0] == 1011
