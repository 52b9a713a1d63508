"""The supervisor against a sidecar process that misbehaves on cue
(scripted_sidecar.py): audio that crashes every process it is replayed into
costs only its own stream, a hung decode is noticed and restarted, so is a
sidecar that answers no ping while it has no work, and a malformed event or a
failing supervision step never ends supervision."""

from __future__ import annotations

import stat
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway.dictation.sidecar import RESTARTED, AsrSupervisor
from gateway.dictation.watchdog import Watchdog
from tests.gateway.helpers import dictation_client
from tests.support.sockets import close_code, receive

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SCRIPT = Path(__file__).with_name("scripted_sidecar.py")
CUE = (np.full(1600, 0.5) * 32768).astype("<i2").tobytes()  # first sample exactly 0.5 once decoded
QUIET = bytes(3200)
DROPPED = ("the ASR sidecar failed 2 times in a row while it held this stream's audio; the stream was dropped so "
           "the others can go on")


def scripted(tmp_path: Path, mode: str, supervisor: type[AsrSupervisor] = AsrSupervisor, **kw: Any) -> AsrSupervisor:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "model.bin").write_bytes(b"not read by the scripted sidecar")
    wrapper = tmp_path / f"sidecar-{mode}"
    wrapper.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{SCRIPT}' {mode}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return supervisor(model=str(model), data_dir=tmp_path, python=str(wrapper), backoff_s=(0.0,), **kw)


def events_until_close(ws) -> tuple[list[dict], tuple[int, str]]:
    events: list[dict] = []
    with pytest.raises(Exception) as closed:  # WebSocketDisconnect carries the code and reason
        while True:
            events.append(receive(ws))
    return events, (closed.value.code, closed.value.reason)


def _poisoned_stream_is_dropped_and_the_other_goes_on(tmp_path: Path, supervisor: AsrSupervisor) -> None:
    with dictation_client(tmp_path, supervisor) as client, \
            client.websocket_connect("/v1/dictation") as innocent, client.websocket_connect("/v1/dictation") as poisoned:
        receive(innocent), receive(poisoned)
        innocent.send_bytes(QUIET)
        poisoned.send_bytes(CUE)
        events, closed = events_until_close(poisoned)
        assert events[0] == {"type": "speech_started", "utterance": 0, "at": 0.0}
        assert [e.get("code") for e in events[1:]] == ["asr_unavailable", "asr_failed"]
        assert events[-1] == {"type": "error", "code": "asr_failed", "message": DROPPED, "retryable": False}
        assert closed == (1011, DROPPED[:123])
        # The other stream saw the restarts, kept its place and ends normally.
        innocent.send_json({"type": "end"})
        rest, closed = events_until_close(innocent)
        assert [e["type"] for e in rest] == ["error", "error", "closed"]
        assert {e.get("code") for e in rest[:2]} == {"asr_unavailable"}
        assert closed == (1000, "")
        assert supervisor.restarts >= 2


def test_audio_that_crashes_every_process_costs_only_its_own_stream(tmp_path: Path) -> None:
    _poisoned_stream_is_dropped_and_the_other_goes_on(tmp_path, scripted(tmp_path, "crash"))


def test_a_hung_decode_is_killed_by_the_watchdog_and_restarted(tmp_path: Path) -> None:
    supervisor = scripted(tmp_path, "hang", watchdog=Watchdog(decode_timeout_s=1.0, silence_timeout_s=60.0))
    _poisoned_stream_is_dropped_and_the_other_goes_on(tmp_path, supervisor)


def test_an_idle_sidecar_that_answers_no_ping_is_restarted_before_anyone_needs_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    supervisor = scripted(tmp_path, "mute", watchdog=Watchdog(silence_timeout_s=1.0, ping_after_s=0.2, tick_s=0.05))
    with dictation_client(tmp_path, supervisor):
        deadline = time.monotonic() + 30
        while supervisor.info()["restarts"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert supervisor.info()["restarts"] >= 1
    killed = [r.getMessage() for r in caplog.records if "restarting the ASR sidecar" in r.getMessage()]
    assert killed[0].startswith("the ASR sidecar sent nothing for ")
    assert killed[0].endswith(" s and answered no ping; restarting the ASR sidecar")


def test_a_malformed_event_does_not_end_supervision(tmp_path: Path) -> None:
    supervisor = scripted(tmp_path, "malformed")
    with dictation_client(tmp_path, supervisor) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(CUE)
        assert receive(ws) == {"type": "speech_started", "utterance": 0, "at": 0.0}
        final = receive(ws)
        assert (final["type"], final["text"]) == ("final", "still here")
        ws.send_json({"type": "end"})
        assert receive(ws)["type"] == "closed"
        assert close_code(ws) == (1000, "")
    assert supervisor.restarts == 0


class FailingOnce(AsrSupervisor):
    """A supervisor with a bug in its handling of the first sidecar event it reads."""

    failures = 1

    def on_frame(self, header: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("a bug in supervision")
        super().on_frame(header)


def test_a_failing_supervision_step_restarts_the_sidecar_instead_of_ending_supervision(tmp_path: Path) -> None:
    supervisor = scripted(tmp_path, "crash", FailingOnce)
    with dictation_client(tmp_path, supervisor) as client, client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        ws.send_bytes(QUIET)
        ws.send_json({"type": "end"})  # its ``ended`` is the first event: supervision fails on it
        events, closed = events_until_close(ws)
        assert [e["type"] for e in events] == ["error", "closed"]
        assert (events[0]["code"], events[0]["message"]) == ("asr_unavailable", RESTARTED)
        assert closed == (1000, "")
    assert supervisor.restarts == 1
