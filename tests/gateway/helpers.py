"""Building the real app around fakes, for the in-process gateway tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.testclient import TestClient

from engines.base import AsrService, TtsEngine
from gateway.app import create_app
from gateway.config import Settings
from tests.support.hosts import TEST_HOST
from tests.support.listeners import FakeListener

LOOPBACK = ("127.0.0.1", 5000)


def make_app(tmp_path: Path, *, tts: Mapping[str, TtsEngine] | None = None, asr: AsrService | None = None,
             **settings: Any) -> Starlette:
    """The real app with ``tts`` engines (default none) and ``asr`` (default
    none), its data under ``tmp_path`` and a share listener that opens nothing."""
    engines = settings.pop("engines", ("asr",) if asr is not None else ())
    settings.setdefault("allowed_hosts", (TEST_HOST,))
    return create_app(Settings(engines=engines, data_dir=tmp_path, **settings), tts_engines=dict(tts or {}),
                      asr=asr, share_listener=FakeListener())


def make_client(tmp_path: Path, *, client: tuple[str, int] = LOOPBACK, **kw: Any) -> TestClient:
    """A TestClient (from ``client``, loopback by default) over ``make_app(tmp_path, **kw)``."""
    return TestClient(make_app(tmp_path, **kw), client=client)


def tts_app(tmp_path: Path, engine: TtsEngine | None = None, **settings: Any) -> Starlette:
    """The app with ``engine`` (default a ``FakeTtsEngine``) as its only TTS engine, "pocket"."""
    from tests.gateway.fakes import FakeTtsEngine

    return make_app(tmp_path, tts={"pocket": engine or FakeTtsEngine()}, **settings)


def tts_client(tmp_path: Path, engine: TtsEngine | None = None, **settings: Any) -> TestClient:
    return TestClient(tts_app(tmp_path, engine, **settings), client=LOOPBACK)


def dictation_client(tmp_path: Path, asr: AsrService | None = None, *, client: tuple[str, int] = LOOPBACK,
                     **settings: Any) -> TestClient:
    """A loopback TestClient over the app with ``asr`` (default a ready ``FakeSidecar``) and no TTS."""
    from tests.support.fake_sidecar import FakeSidecar

    return make_client(tmp_path, client=client, asr=asr or FakeSidecar(), **settings)


# ---- the drain before a stop


def start_drain(client: TestClient) -> Any:
    """Begin the app's drain on its event loop; the future resolves (True: every
    session ended on its own) when it is over."""
    from gateway.drain import Drainer

    drainer = client.app_state["drain"]
    assert isinstance(drainer, Drainer)
    return client.portal.start_task_soon(drainer.run)


def wait_for(predicate: Any, what: str) -> None:
    """Poll ``predicate`` until it holds (bounded); fail naming ``what`` when it never does."""
    from tests.support.waiting import wait_until

    wait_until(predicate, what)


def draining(client: TestClient) -> bool:
    return bool(client.get("/health/ready").status_code == 503)


def drain_marks(fake: Any) -> list[str]:
    """The finalize ids a drain sent a ``FakeSidecar`` (the session's own marks)."""
    return [h["id"] for h, _ in fake.frames if h["op"] == "finalize" and h.get("id", "").startswith("drain-")]
