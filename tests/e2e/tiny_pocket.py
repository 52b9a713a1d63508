"""The real Pocket engine on a tiny random-weight checkpoint, served in this
event loop: the gateway of the end-to-end tests of the TTS routes and fronts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.listeners import FakeListener
from tests.support.net import running_server


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engines.pocket.random_checkpoint import make_random_model_dir

    dest = tmp_path_factory.mktemp("pocket") / "tiny"
    make_random_model_dir(dest, geometry="tiny", seed=0)
    return dest


def pocket_app(model_dir: Path, tmp_path: Path, **settings: Any) -> tuple[Any, Any]:
    """The app with Pocket as its one engine (``settings`` on top of the defaults), and the engine."""
    from engines.pocket.engine import PocketEngine
    from gateway.app import create_app
    from gateway.config import Settings

    engine = PocketEngine(model_dir=model_dir, voices_dir=tmp_path / "voices", quantize="none", threads=1)
    app = create_app(Settings(engines=(), data_dir=tmp_path, **settings), tts_engines={"pocket": engine},
                     share_listener=FakeListener())
    return app, engine


async def wait_healthy(url: str, **client_options: Any) -> None:
    """Wait until ``/health`` answers 200: the lifespan loads the engine in the background."""
    async with httpx.AsyncClient(base_url=url, timeout=30, **client_options) as http:
        for _ in range(300):
            if (await http.get("/health")).status_code == 200:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the gateway did not load its engine")


@contextlib.asynccontextmanager
async def serving_pocket(model_dir: Path, tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[str, Any]]:
    """``pocket_app`` served on a free loopback port once healthy: its base URL and the engine."""
    app, engine = pocket_app(model_dir, tmp_path, **settings)
    async with running_server(app) as url:
        await wait_healthy(url)
        yield url, engine
