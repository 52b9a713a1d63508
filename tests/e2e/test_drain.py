"""SIGTERM on a real `voxgate serve` during a real utterance: the drain lets
the utterance reach its final (with the words sent before the signal), refuses
new sockets, answers 503 on readiness, then closes the socket 1001 and the
process stops by itself. Real ASR sidecar (tiny.en) and Piper speech."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed

from gateway.client.dictation import DictationClient, DictationRefused
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import piper_say, resample, silence, wer

pytestmark = pytest.mark.slow

SENTENCE = "The juice of lemons makes fine punch, and the hogs were fed chopped corn and garbage."
MAX_WER = 0.25
DRAINING = "the server is draining before it stops; retry (another replica will answer)"


async def wait_draining(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        for _ in range(200):
            r = await http.get(url + "/health/ready")
            if r.status_code == 503:
                return r
            await asyncio.sleep(0.05)
    raise AssertionError("/health/ready never answered 503")


async def test_sigterm_mid_utterance_sends_its_final_refuses_new_sockets_then_closes_1001(tmp_path):
    speech, rate = piper_say(SENTENCE)
    speech = resample(speech, rate)
    half = len(speech) // 2
    env = {"VOXGATE_DRAIN_S": "60", "VOXGATE_ASR_THREADS": "2"}
    with running_gateway(tmp_path, "asr", env=env) as gw:
        async with await DictationClient.connect(gw.url) as client:
            events: list[dict] = []

            async def read() -> None:
                async for event in client.events():
                    events.append(event)

            reader = asyncio.create_task(read())
            # the first half of the sentence, then the signal while the speaker is mid-word
            await client.stream_samples(np.concatenate([silence(0.5), speech[:half]]), realtime=True)
            assert [e["type"] for e in events if e["type"] == "speech_started"] == ["speech_started"]
            gw.proc.send_signal(signal.SIGTERM)
            ready = await wait_draining(gw.url)
            assert ready.json()["status"] == "draining"
            with pytest.raises(DictationRefused) as refused:
                await DictationClient.connect(gw.url)
            assert (refused.value.code, refused.value.reason) == (1013, DRAINING)
            assert refused.value.events == [{"type": "error", "code": "draining", "message": DRAINING,
                                             "retryable": True}]
            # the speaker finishes the sentence; the utterance ends on its own silence
            # (the server may close after the final while trailing silence is still being sent)
            with contextlib.suppress(ConnectionClosed):
                await client.stream_samples(np.concatenate([speech[half:], silence(2.0)]), realtime=True)
            await asyncio.wait_for(reader, 60)
        finals = [e for e in events if e["type"] == "final"]
        assert len(finals) == 1, events
        assert wer(SENTENCE, finals[0]["text"]) <= MAX_WER, finals[0]["text"]
        assert events[-1] == finals[0]  # nothing after the final but the close
        assert client.close_code == 1001
        assert client.close_reason == "server stopping; every final is sent; retry on a new connection"
        assert gw.proc.wait(timeout=30) in (0, -signal.SIGTERM)  # it stopped by itself after the drain
        err = gw.proc.stderr.read()
    assert "draining: 1 live session(s), up to 60 s; new sessions are refused" in err
    assert "drained: every session finished its work" in err
