"""Dictation input is paced: a stream may run ``dictation_max_ahead_s`` ahead of
real time, then the session stops reading its socket until real time catches
up. Nothing is dropped. The clock is a fake, so no test waits."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.dictation.pacing import Pacer
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.pacing_clock import PacingClock, install
from tests.support.sockets import close_code, receive


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> PacingClock:
    return install(monkeypatch, PacingClock())


def test_a_stream_may_run_the_allowance_ahead_of_real_time(fake_time: PacingClock) -> None:
    pacer = Pacer(max_ahead_s=2.0)
    assert [pacer.add(1.0), pacer.add(1.0), pacer.add(1.0)] == [0.0, 0.0, 1.0]
    assert pacer.ahead_s == 3.0
    fake_time.now += 1.0
    assert (pacer.ahead_s, pacer.add(0.5)) == (2.0, 0.5)
    fake_time.now += 60.0  # a quiet minute: the allowance is whole again, not banked
    assert (pacer.ahead_s, pacer.add(2.0), pacer.add(0.25)) == (0.0, 0.0, 0.25)


def test_a_client_sending_faster_than_real_time_is_read_at_real_time(tmp_path, fake_time: PacingClock) -> None:
    fake = FakeSidecar()
    second = (np.full(16000, 0.1) * 32767).astype("<i2").tobytes()
    with dictation_client(tmp_path, fake, dictation_max_ahead_s=2.0) as client, \
            client.websocket_connect("/v1/dictation") as ws:
        receive(ws)
        for _ in range(5):
            ws.send_bytes(second)
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 5.0}
        assert close_code(ws) == (1000, "")
        (stream_id,) = {h["stream"] for h, _ in fake.frames}
    assert fake_time.pauses == [1.0, 1.0, 1.0]
    assert len(fake.audio_sent(stream_id)) == 5 * 16000  # all of it reached the recognizer
