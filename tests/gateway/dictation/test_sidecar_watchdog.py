"""The watchdog against the real sidecar server over a stand-in model
(stand_in_sidecar.py): an idle sidecar is alive, not hung, so the first
transcription after an idle period longer than the watchdog's limit is
answered by the same process; a decode that hangs is still killed and the
next transcription is answered by the new process."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.audio import write_wav
from gateway.dictation.sidecar import AsrSupervisor
from gateway.dictation.watchdog import Watchdog
from tests.gateway.helpers import dictation_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SCRIPT = Path(__file__).with_name("stand_in_sidecar.py")
WAV = write_wav(np.zeros(8000, dtype=np.float32), 8000)


def stand_in(tmp_path: Path, *script_args: str, **kw: Any) -> AsrSupervisor:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "model.bin").write_bytes(b"not read by the stand-in sidecar")
    wrapper = tmp_path / "sidecar"
    wrapper.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{SCRIPT}' {' '.join(script_args)} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return AsrSupervisor(model=str(model), data_dir=tmp_path, python=str(wrapper), backoff_s=(0.0,), **kw)


def transcribe(client: Any) -> Any:
    return client.post("/v1/audio/transcriptions", data={"model": "whisper-1"},
                       files={"file": ("a.wav", WAV, "audio/wav")})


def restarts(client: Any) -> int:
    asr = next(e for e in client.get("/v1/engines").json()["engines"] if e["kind"] == "asr")
    return int(asr["restarts"])


def test_the_first_transcription_after_an_idle_period_is_answered_without_a_restart(tmp_path: Path) -> None:
    watchdog = Watchdog(silence_timeout_s=2.0, ping_after_s=0.2, tick_s=0.05)
    supervisor = stand_in(tmp_path, "--decode-s", "0.5", watchdog=watchdog)
    with dictation_client(tmp_path, supervisor) as client:
        first = transcribe(client)
        assert (first.status_code, first.json()) == (200, {"text": "still awake"})
        time.sleep(1.5 * watchdog.silence_timeout_s)  # idle, longer than the watchdog lets a sidecar be silent
        after_idle = transcribe(client)
        assert (after_idle.status_code, after_idle.json()) == (200, {"text": "still awake"})
        assert restarts(client) == 0
    assert watchdog.pings >= 1  # the idle sidecar was asked, and answered


def test_a_hung_decode_is_killed_and_the_next_transcription_gets_a_new_process(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # silence cannot end this process within the test: only the decode's age can
    watchdog = Watchdog(decode_timeout_s=1.0, silence_timeout_s=60.0, ping_after_s=0.2, tick_s=0.05)
    supervisor = stand_in(tmp_path, "--hang-once", str(tmp_path / "hung-once"), watchdog=watchdog)
    with dictation_client(tmp_path, supervisor) as client:
        hung = transcribe(client)
        assert (hung.status_code, hung.json()) == (503, {
            "detail": "the ASR sidecar restarted during the transcription; retry", "code": "asr_unavailable"})
        assert hung.headers["retry-after"] == "2"
        retried = transcribe(client)  # the new process decodes it
        assert (retried.status_code, retried.json()) == (200, {"text": "still awake"})
        assert restarts(client) == 1
    killed = [r.getMessage() for r in caplog.records if r.name == "voxgate.asr" and "restarting the ASR" in r.getMessage()]
    assert len(killed) == 1 and killed[0].startswith("a decode has run for "), killed
