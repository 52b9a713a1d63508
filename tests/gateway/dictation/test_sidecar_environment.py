"""The ASR sidecar is started without the gateway's secrets in its environment."""

from __future__ import annotations

import stat

import pytest

from gateway.app import build_asr
from gateway.child_env import child_environment
from gateway.config import Settings


async def test_the_sidecar_does_not_inherit_the_api_key(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXGATE_API_KEY", "vgk-secret-in-env-Jd5wQ9xM2r")
    monkeypatch.setenv("HF_TOKEN", "hf-secret-in-env")
    monkeypatch.setenv("VOXGATE_PORT", "8123")
    monkeypatch.setenv("LANG", "C.UTF-8")
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.bin").write_bytes(b"not a model")
    dump = tmp_path / "environment.txt"
    fake_python = tmp_path / "fake-python"  # stands in for `python -m engines.asr`: records, then fails to start
    fake_python.write_text(f"#!/bin/sh\nenv > '{dump}'\nprintf '{{\"ev\":\"fatal\",\"message\":\"fake\"}}\\n'\n")
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    supervisor = build_asr(Settings(engines=("asr",), asr_model=str(model), data_dir=tmp_path))
    assert supervisor is not None
    supervisor.python = str(fake_python)
    await supervisor.start()
    await supervisor.aclose()
    names = {line.split("=", 1)[0] for line in dump.read_text().splitlines() if "=" in line}
    assert "LANG" in names
    assert not {"VOXGATE_API_KEY", "VOXGATE_PORT", "HF_TOKEN"} & names
    assert supervisor.status().detail == "the ASR sidecar did not start: fake"


def test_child_environment_drops_voxgate_and_credential_names() -> None:
    env = {"PATH": "/usr/bin", "VOXGATE_API_KEY": "k", "voxgate_host": "h", "AWS_SECRET_ACCESS_KEY": "s",
           "OPENAI_API_KEY": "o", "DB_PASSWORD": "p", "GH_TOKEN": "t", "OMP_NUM_THREADS": "2"}
    assert child_environment(env) == {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}
