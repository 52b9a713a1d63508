"""Pipecat's Deepgram services against the Deepgram front of a real `voxgate serve`
(the ASR sidecar with tiny.en, Pocket with random weights), each in a minimal
Pipecat pipeline: ``DeepgramSTTService(base_url=...)`` behind Pipecat's Silero VAD
hears Piper speech, ``DeepgramTTSService(base_url=...)`` speaks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence, wer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              # deepgram-sdk imports websockets' legacy client API, which warns on import
              pytest.mark.filterwarnings("ignore:websockets.*deprecated:DeprecationWarning")]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # Pipecat's own, at import
    pytest.importorskip("pipecat", reason="pipecat-ai is not installed (pip install 'voxgate[test]' on Python >= 3.11)")
    from pipecat.frames.frames import (
        ErrorFrame,
        InterimTranscriptionFrame,
        InterruptionFrame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
    )
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.deepgram.tts import DeepgramTTSService

    from tests.support.pipecat_driver import Heard, Run, vad

FIRST = "It's easy to tell the depth of a well."
SECOND = "Glue the sheet to the dark blue background."
MAX_WORD_ERRORS = 2  # per sentence of 8-9 words; tiny.en on Piper: ~10% WER on average
KEY = "unused-on-loopback"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from engines.pocket.random_checkpoint import make_random_model_dir

    dest = tmp_path_factory.mktemp("pocket") / "tiny"
    make_random_model_dir(dest, geometry="tiny", seed=0)
    return dest


@pytest.fixture(scope="module")
def ws_url(tmp_path_factory, model_dir):
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_POCKET_DIR": str(model_dir)}
    with running_gateway(tmp_path_factory.mktemp("data"), "asr,pocket", env=env) as gw:
        yield gw.url.replace("http://", "ws://")


def word_errors(want: str, got: str) -> float:
    return round(wer(want, got) * len(want.split()), 6)


def speech(*texts: str) -> bytes:
    parts = [silence(0.5)]
    for text in texts:
        samples, rate = piper_say(text)
        parts += [resample(samples, rate), silence(1.5)]
    return pcm16(np.concatenate(parts))


async def test_stt_service_finals_come_from_finalize_at_each_vad_stop(ws_url):
    stt = DeepgramSTTService(api_key=KEY, base_url=ws_url)
    async with Run(vad(), stt) as run:
        await run.send_audio(speech(FIRST, SECOND))
        await run.wait_for(lambda heard: len(heard.finals()) >= 2)
    finals = run.heard.finals()
    assert len(finals) == 2, [f.text for f in finals]
    for want, got in zip([FIRST, SECOND], finals, strict=True):
        assert word_errors(want, got.text) <= MAX_WORD_ERRORS, got.text
    # finalized: Pipecat saw `from_finalize: true` on the Results its Finalize (sent at VAD stop) asked for
    assert [f.finalized for f in finals] == [True, True]
    assert run.heard.of(InterimTranscriptionFrame), "Pipecat asks for interim_results and shows them"
    assert not run.heard.of(ErrorFrame)
    # Pipecat's STT latency metric (speech end by its VAD -> finalized transcript), reported once per turn
    assert len(run.heard.ttfb(stt.name)) == 2


def stopped(heard: Heard, count: int) -> bool:
    return len(heard.of(TTSStoppedFrame)) >= count


async def test_tts_service_speaks_and_stops_at_flushed(ws_url):
    tts = DeepgramTTSService(api_key=KEY, base_url=ws_url, sample_rate=24000)
    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame("Hello there, this is a test. And here is a second sentence."))
        await run.wait_for(lambda heard: stopped(heard, 1))
    kinds = [type(f) for _, f in run.heard.frames if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))]
    assert kinds[0] is TTSStartedFrame and kinds[-1] is TTSStoppedFrame
    audio = run.heard.of(TTSAudioRawFrame)
    assert {(f.sample_rate, f.num_channels) for f in audio} == {(24000, 1)}
    assert sum(len(f.audio) for f in audio) > 24000 * 2 * 0.2  # at least 0.2 s of 24 kHz 16-bit audio
    assert len(run.heard.ttfb(tts.name)) == 1
    assert not run.heard.of(ErrorFrame)


async def test_tts_service_speaks_the_next_answer_after_an_interruption(ws_url):
    """Barge-in: Pipecat sends Clear on interruption; the same socket then speaks the next answer to its end."""
    tts = DeepgramTTSService(api_key=KEY, base_url=ws_url, sample_rate=24000)
    async with Run(tts) as run:
        await run.worker.queue_frame(TTSSpeakFrame("This is a long answer. " * 20))
        await run.wait_for(lambda heard: bool(heard.of(TTSAudioRawFrame)))
        await run.worker.queue_frame(InterruptionFrame())
        await run.worker.queue_frame(TTSSpeakFrame("And this is the next answer."))
        await run.wait_for(lambda heard: len(heard.of(TTSStartedFrame)) == 2 and any(
            f.context_id == heard.of(TTSStartedFrame)[1].context_id for f in heard.of(TTSStoppedFrame)))
    second = run.heard.of(TTSStartedFrame)[1].context_id
    assert any(f.context_id == second for f in run.heard.of(TTSAudioRawFrame))
    assert not run.heard.of(ErrorFrame)
