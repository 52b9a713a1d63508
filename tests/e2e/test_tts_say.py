"""``voxgate say --url``: the CLI in its own process against a running gateway."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.audio import Encoding, encode, read_wav
from gateway.config import Settings
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.support.listeners import FakeListener
from tests.support.net import running_server

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def say(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli.main import main; raise SystemExit(main())", "say", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, err.decode()


async def test_say_url_writes_the_gateway_audio(tmp_path):
    app = create_app(Settings(engines=(), data_dir=tmp_path), tts_engines={"pocket": FakeTtsEngine()},
                     share_listener=FakeListener())
    async with running_server(app) as url:
        out = tmp_path / "out.wav"
        code, err = await say("Said through the gateway.", "--url", url, "--seed", "11", "--voice", "marius",
                              "-o", str(out))
        assert code == 0, err
        samples, rate = read_wav(out.read_bytes())
        assert rate == 24000
        assert encode(samples, Encoding.S16LE) == encode(expected_audio("Said through the gateway.", 11),
                                                         Encoding.S16LE)
        assert f"voice marius from {url}" in err

        code, err = await say("hi", "--url", url, "--voice", "nobody", "-o", str(tmp_path / "x.wav"))
        assert code == 2
        assert err.startswith(f"voxgate say: {url}: unknown_voice: unknown voice 'nobody'; available voices: "
                              "alba, marius")
        assert not (tmp_path / "x.wav").exists()
