"""The real sidecar process under the supervisor: a start that fails, the
multilingual model with language detection, and restart after a crash."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import numpy as np
import pytest

from engines.asr.models import install_whisper_base
from engines.base import EngineState
from gateway.dictation.sidecar import AsrSupervisor
from gateway.protocol.common import ErrorEvent
from tests.gateway.helpers import make_client
from tests.support.speech import espeak_say, piper_say, resample, silence, wer

pytestmark = pytest.mark.slow


async def test_a_missing_model_is_reported_without_starting_a_process(tmp_path):
    asr = AsrSupervisor(model="whisper-base", data_dir=tmp_path)
    await asr.start()
    status = asr.status()
    assert status.state is EngineState.MISSING
    assert status.hint == "voxgate models install whisper-base"
    assert asr.pid is None
    await asr.aclose()


def test_a_model_that_cannot_load_fails_the_engine_and_the_socket_says_why(tmp_path):
    model = tmp_path / "broken"
    model.mkdir()
    (model / "model.bin").write_bytes(b"this is not a model")
    with make_client(tmp_path, engines=("asr",), asr_model=str(model)) as client:
        for _ in range(300):
            health = client.get("/health")
            if health.status_code == 200:
                break
            time.sleep(0.1)
        assert health.json()["asr"] == {"state": "failed"}  # no paths, no stderr on the public route
        asr = next(e for e in client.get("/v1/engines").json()["engines"] if e["kind"] == "asr")
        assert asr["state"] == "failed"
        assert asr["detail"].startswith(f"the ASR sidecar did not start: cannot load ASR model '{model}'")
        with client.websocket_connect("/v1/dictation") as ws:
            error = json.loads(ws.receive()["text"])
            assert error["code"] == "engine_unavailable"
            assert error["message"] == ("Speech recognition is not available on this gateway (failed to load); "
                                        "an admin can see why at GET /v1/engines")
            close = ws.receive()
            assert close["type"] == "websocket.close" and close["code"] == 1011


def test_an_end_of_turn_model_that_cannot_load_fails_the_engine_and_says_which(tmp_path):
    missing = tmp_path / "no-such-turn-model.onnx"
    with make_client(tmp_path, engines=("asr",), asr_turn_model=str(missing)) as client:
        for _ in range(300):
            asr = next(e for e in client.get("/v1/engines").json()["engines"] if e["kind"] == "asr")
            if asr["state"] != "loading":
                break
            time.sleep(0.1)
        assert asr["state"] == "failed"
        assert f"or turn model '{missing}'" in asr["detail"], asr["detail"]


async def test_the_end_of_turn_model_found_in_pipecat_loads_with_the_recognizer(tmp_path):
    asr = AsrSupervisor(model="tiny.en", data_dir=tmp_path, threads=2, turn_model="auto")
    await asr.start()
    try:
        assert asr.status().state is EngineState.READY, asr.status()
        assert asr.info()["turn_model"] is True  # /v1/engines shows it
    finally:
        await asr.aclose()


async def test_multilingual_base_detects_german_and_takes_a_language(tmp_path):
    install_whisper_base(tmp_path)
    asr = AsrSupervisor(model="whisper-base", data_dir=tmp_path, threads=2)
    await asr.start()
    try:
        assert asr.status().state is EngineState.READY
        assert {"de", "en", "fr"} <= set(asr.info()["languages"])
        german = "Guten Morgen. Das Wetter ist heute sehr schön."
        samples, rate = espeak_say(german, voice="de", words_per_minute=140)
        audio = np.concatenate([silence(0.3), resample(samples, rate), silence(0.8)])
        result = await asr.transcribe(audio, language=None, word_timestamps=False, timeout_s=120)
        assert result["language"] == "de"
        # espeak-ng German is hard for Whisper base; the greeting comes through reliably
        assert "guten morgen" in result["text"].lower(), result["text"]

        for language in ("de", None):  # named, and detected per utterance
            stream = await asr.open_stream({"language": language, "interim": True, "word_timestamps": False,
                                            "silence_ms": 500})
            await stream.send_audio(audio)
            await stream.end()
            events = []
            while not events or type(events[-1]).__name__ != "Closed":
                events.append(await asyncio.wait_for(stream.events.get(), 60))
            finals = [e for e in events if type(e).__name__ == "Final"]
            assert finals and [f.language for f in finals] == ["de"] * len(finals)
            assert "guten morgen" in finals[0].text.lower(), finals[0].text
            await stream.close()
    finally:
        await asr.aclose()


async def test_a_killed_sidecar_restarts_and_replays_the_open_utterance(tmp_path):
    text = "Glue the sheet to the dark blue background."
    samples, rate = piper_say(text)
    speech = resample(samples, rate)
    half = len(speech) // 2
    asr = AsrSupervisor(model="tiny.en", data_dir=tmp_path, threads=2, backoff_s=(0.0, 0.5))
    await asr.start()
    try:
        stream = await asr.open_stream({"language": None, "interim": True, "word_timestamps": False,
                                        "silence_ms": 500})
        await stream.send_audio(np.concatenate([silence(0.3), speech[:half]]))
        first_pid = asr.pid
        os.kill(first_pid, signal.SIGKILL)
        await stream.send_audio(speech[half:])  # sent while the process is down: kept, replayed
        await stream.send_audio(silence(0.8))
        await stream.end()
        events = []
        while not events or type(events[-1]).__name__ != "Closed":
            events.append(await asyncio.wait_for(stream.events.get(), 60))
        errors = [e for e in events if isinstance(e, ErrorEvent)]
        assert (errors[0].code, errors[0].retryable) == ("asr_unavailable", True)
        finals = [e for e in events if type(e).__name__ == "Final"]
        assert len(finals) == 1 and wer(text, finals[0].text) <= 0.25, finals
        assert asr.restarts == 1 and asr.pid not in (None, first_pid)
        assert asr.status().state is EngineState.READY
        await stream.close()
    finally:
        await asr.aclose()


async def test_waiting_for_a_sidecar_that_fails_returns_at_once(tmp_path):
    model = tmp_path / "broken"
    model.mkdir()
    (model / "model.bin").write_bytes(b"junk")
    asr = AsrSupervisor(model=str(model), data_dir=tmp_path)
    starting = asyncio.create_task(asr.start())
    assert await asr.wait_ready(300) is False  # the failure ends the wait (the test timeout would not)
    await starting
    assert asr.status().state is EngineState.FAILED
    await asr.aclose()


async def next_of(stream, *kinds: str):
    """The next event of one of ``kinds`` (others are skipped); bounded wait."""
    while True:
        event = await asyncio.wait_for(stream.events.get(), 60)
        if type(event).__name__ in kinds:
            return event


async def test_eager_final_then_turn_resumed_when_speech_comes_back_then_the_final_repeats_the_eager(tmp_path):
    first, second = "It's easy to tell the depth of a well.", "Glue the sheet to the dark blue background."
    speech = {}
    for text in (first, second):
        samples, rate = piper_say(text)
        speech[text] = resample(samples, rate)
    asr = AsrSupervisor(model="tiny.en", data_dir=tmp_path, threads=2)
    await asr.start()
    try:
        stream = await asr.open_stream({"language": None, "interim": True, "word_timestamps": False,
                                        "silence_ms": 2000, "eager": True})
        # a pause shorter than the 2 s silence window: the speculative final goes out as eager_final
        await stream.send_audio(np.concatenate([silence(0.3), speech[first], silence(1.0)]))
        eager = await next_of(stream, "EagerFinal", "Final")
        assert type(eager).__name__ == "EagerFinal" and eager.utterance == 0
        assert wer(first, eager.text) <= 0.25, eager.text
        # speech comes back inside the window: the eager final is withdrawn
        await stream.send_audio(np.concatenate([speech[second], silence(0.5)]))
        resumed = await next_of(stream, "TurnResumed", "Final")
        assert type(resumed).__name__ == "TurnResumed" and resumed.utterance == 0
        assert eager.end < resumed.at
        again = await next_of(stream, "EagerFinal", "Final")
        assert type(again).__name__ == "EagerFinal" and again.utterance == 0
        assert wer(f"{first} {second}", again.text) <= 0.25, again.text
        await stream.send_audio(silence(2.0))  # the silence lasts: the final is the eager final
        final = await next_of(stream, "Final", "TurnResumed")
        assert (type(final).__name__, final.utterance, final.text) == ("Final", 0, again.text)
        await stream.end()
        assert type(await next_of(stream, "Closed")).__name__ == "Closed"
        await stream.close()
    finally:
        await asr.aclose()
