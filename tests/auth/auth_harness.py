"""The auth test harness: a tiny app behind AuthMiddleware, a fake clock, a fake
share listener, and a guard that no secret reaches the logs."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from auth import AuthConfig, AuthMiddleware, AuthState, auth_routes, principal_of
from auth.access import RouteClass, http_route, make_classifier, ws_route
from tests.support.hosts import TEST_HOST
from tests.support.listeners import FakeListener

KEY = "vgk-test-Zq8rT2mW9xLp4sNe"
LOOPBACK = ("127.0.0.1", 50000)
REMOTE = ("198.51.100.9", 50000)  # never in a trusted network
TRUSTED = ("203.0.113.7", 50000)  # in TRUSTED_NET
SOCKET_PATHS = ("/v1/tts", "/v1/dictation")


def with_test_host(config: AuthConfig) -> AuthConfig:
    """``config`` whose Host allow-list also names TestClient's ``testserver``."""
    return dataclasses.replace(config, allowed_hosts=(*config.allowed_hosts, TEST_HOST))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _who(scope: dict) -> dict:
    principal = principal_of(scope)
    return {"principal": principal.kind.value, "may_admin": principal.may_admin}


async def http_echo(request: Request) -> JSONResponse:
    return JSONResponse(_who(request.scope))


async def socket_echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_json(_who(websocket.scope))
    try:
        while True:
            await websocket.send_text(await websocket.receive_text())
    except WebSocketDisconnect:
        pass


def build_test_app(state: AuthState) -> Starlette:
    """One route per class on each transport, the socket routes at SOCKET_PATHS."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield {"auth": state}

    routes = [
        http_route("/public", http_echo, access=RouteClass.PUBLIC, methods=["GET", "POST"]),
        http_route("/consume", http_echo, access=RouteClass.CONSUME, methods=["GET", "POST"]),
        http_route("/admin", http_echo, access=RouteClass.ADMIN, methods=["GET", "POST"]),
        *(ws_route(path, socket_echo, access=RouteClass.CONSUME) for path in SOCKET_PATHS),
        ws_route("/ws/admin", socket_echo, access=RouteClass.ADMIN),
        *auth_routes(),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(AuthMiddleware, classify=make_classifier(routes))
    return app


@dataclass
class Harness:
    """A running test app with one client per address, all sharing one AuthState."""

    state: AuthState
    clock: FakeClock | None  # None for the real app, which runs on the real clock
    listener: FakeListener
    local: TestClient
    remote: TestClient
    trusted: TestClient
    secrets: list[str] = field(default_factory=list)

    def client(self, name: str) -> TestClient:
        return {"local": self.local, "remote": self.remote, "trusted": self.trusted}[name]

    def enable_pin(self, headers: dict[str, str] | None = None) -> str:
        r = self.local.post("/v1/admin/share", headers=headers)
        assert r.status_code == 201, r.text
        pin = r.json()["pin"]
        self.secrets.append(pin)
        return pin

    def key_session(self) -> str:
        r = self.local.post("/v1/auth/session", headers={"Authorization": f"Bearer {KEY}"}, json={"transport": "bearer"})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        self.secrets.append(token)
        return token

    def pin_session(self, pin: str) -> str:
        r = self.remote.post("/v1/auth/session", json={"pin": pin, "transport": "bearer"})
        assert r.status_code == 201, r.text
        token = r.json()["token"]
        self.secrets.append(token)
        return token

    def ticket(self, path: str) -> str:
        r = self.local.post("/v1/auth/ticket", json={"path": path})
        assert r.status_code == 201, r.text
        ticket = r.json()["ticket"]
        self.secrets.append(ticket)
        return ticket


@pytest.fixture
def leak_guard(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """Every secret a test puts in this list must be absent from all log output."""
    caplog.set_level(logging.DEBUG)
    hidden: list[str] = [KEY]
    yield hidden
    # The test's own HTTP client (httpx) logs the URLs it requests; that is the
    # client side, not the gateway, so it is left out.
    records = [r for phase in ("setup", "call") for r in caplog.get_records(phase)] + caplog.records
    text = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in records if not r.name.startswith("httpx"))
    for secret in hidden:
        assert secret not in text


@pytest.fixture
def harness(leak_guard: list[str]):
    """``harness(config)`` -> a running Harness; closed at the end of the test."""
    stack = contextlib.ExitStack()
    made: list[Harness] = []

    def make(config: AuthConfig) -> Harness:
        config = with_test_host(config)
        clock = FakeClock()
        listener = FakeListener()
        state = AuthState(config, share_listener=listener, clock=clock)
        app = build_test_app(state)
        clients = [stack.enter_context(TestClient(app, client=addr)) for addr in (LOOPBACK, REMOTE, TRUSTED)]
        h = Harness(state, clock, listener, *clients, secrets=leak_guard)
        made.append(h)
        return h

    with stack:
        yield make
        for h in made:
            if h.clock is not None:  # the real app's lifespan closes its own state
                h.local.portal.call(h.state.aclose)


@pytest.fixture
def real_harness(leak_guard: list[str]):
    """``real_harness(config)`` -> a Harness over the real app (``gateway.app.create_app``),
    with no engine unless ``tts`` names some.

    One lifespan runs (through the loopback client); the other clients share its
    state, as clients of one server do.
    """
    from gateway.app import create_app
    from gateway.config import Settings

    stack = contextlib.ExitStack()

    def make(config: AuthConfig, tts: dict | None = None, **settings_kw: Any) -> Harness:
        settings = Settings(engines=(), server_mode=config.server_mode, api_key=config.api_key,
                            trusted_networks=config.trusted_networks, allowed_origins=config.allowed_origins,
                            forwarded_allow_ips=config.forwarded_allow_ips, allow_anonymous=config.allow_anonymous,
                            allowed_hosts=(*config.allowed_hosts, TEST_HOST), **settings_kw)
        listener = FakeListener()
        app = create_app(settings, tts_engines=tts, share_listener=listener)
        local = stack.enter_context(TestClient(app, client=LOOPBACK))
        others = []
        for addr in (REMOTE, TRUSTED):
            client = TestClient(app, client=addr)
            client.app_state.update(local.app_state)
            others.append(client)
        return Harness(local.app_state["auth"], None, listener, local, *others, secrets=leak_guard)

    with stack:
        yield make
