"""A missing engine, asked for speech or dictation on every front: the client
gets one sentence naming the engine and its state, never the engine's detail
(a path under the data dir) or hint (a command); the server's log gets both,
once (gateway/engine_notice.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from engines.base import EngineState, EngineStatus, EngineUnavailable
from gateway.audio import write_wav
from gateway.engine_notice import EngineLog
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import dictation_client, make_client, tts_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive
from tests.support.waiting import wait_until

POCKET = ("Pocket TTS is not available on this gateway (not installed); an admin can see why at "
          "GET /v1/engines")
ASR = "Speech recognition is not available on this gateway (not installed); an admin can see why at GET /v1/engines"
NO_ASR = "Speech recognition is not enabled on this gateway"
PULL = "run `voxgate models pull pocket` to download it, or `pip install 'voxgate[tts]'`"
REALTIME = "/v1/realtime?intent=transcription&model=gpt-4o-transcribe"
WAV = write_wav(np.zeros(8000, dtype=np.float32), 8000)


def weights(tmp_path) -> str:
    return f"{tmp_path}/models/pocket/model.safetensors"


def missing_pocket(tmp_path) -> FakeTtsEngine:
    return FakeTtsEngine(state=EngineState.MISSING, detail=f"Pocket TTS weights not found: {weights(tmp_path)}",
                         hint=PULL)


def missing_asr(tmp_path) -> FakeSidecar:
    return FakeSidecar(state=EngineState.MISSING, detail=f"no Whisper model in {tmp_path}/models/whisper",
                       hint="voxgate models install whisper-base")


def assert_no_server_detail(text: str, tmp_path) -> None:
    assert str(tmp_path) not in text
    assert "voxgate models" not in text and "pip install" not in text


# ---- speech


@pytest.mark.parametrize(("path", "body", "expected"), [
    ("/v1/tts", {"text": "Hello."}, {"detail": POCKET, "code": "engine_unavailable", "state": "missing"}),
    ("/v1/audio/speech", {"model": "tts-1", "input": "Hello.", "voice": "alba"},
     {"detail": POCKET, "code": "engine_unavailable", "state": "missing"}),
    ("/v1/text-to-speech/alba/stream", {"text": "Hello."},
     {"detail": {"status": "engine_unavailable", "message": POCKET}}),
    ("/v1/text-to-speech/alba", {"text": "Hello."}, {"detail": {"status": "engine_unavailable", "message": POCKET}}),
])
def test_speech_over_http(tmp_path, path, body, expected) -> None:
    with tts_client(tmp_path, missing_pocket(tmp_path)) as client:
        r = client.post(path, json=body)
    assert (r.status_code, r.json()) == (503, expected)
    assert_no_server_detail(r.text, tmp_path)


def test_cloning_a_voice(tmp_path) -> None:
    with tts_client(tmp_path, missing_pocket(tmp_path)) as client:
        r = client.post("/v1/voices", data={"id": "mine"}, files={"file": ("a.wav", WAV, "audio/wav")})
    assert (r.status_code, r.json()) == (503, {"detail": POCKET, "code": "engine_unavailable", "state": "missing"})
    assert_no_server_detail(r.text, tmp_path)


@pytest.mark.parametrize(("url", "expected"), [
    ("/v1/tts", {"type": "error", "code": "engine_unavailable", "message": POCKET, "retryable": False,
                 "state": "missing"}),
    ("/v1/speak", {"type": "Error", "variant": "engine_unavailable", "description": POCKET,
                   "code": "engine_unavailable"}),
    ("/v1/text-to-speech/alba/stream-input", {"message": POCKET, "error": "engine_unavailable", "code": 503}),
    ("/v1/text-to-speech/alba/multi-stream-input", {"message": POCKET, "error": "engine_unavailable", "code": 503}),
])
def test_speech_over_a_socket(tmp_path, url, expected) -> None:
    with tts_client(tmp_path, missing_pocket(tmp_path)) as client, client.websocket_connect(url) as ws:
        error = receive(ws)
        assert (error, close_code(ws)) == (expected, (1011, POCKET))
    assert_no_server_detail(repr(error), tmp_path)


def test_an_engine_that_goes_missing_after_the_check(tmp_path) -> None:
    """The engine's own refusal (its message names the path) reaches the client as the same sentence."""
    status = EngineStatus(EngineState.MISSING, f"Pocket TTS weights not found: {weights(tmp_path)}", PULL)
    engine = FakeTtsEngine(open_error=EngineUnavailable.not_ready("pocket", "Pocket TTS", status))
    assert weights(tmp_path) in str(engine.open_error)  # what the local CLI prints
    with tts_client(tmp_path, engine) as client:
        r = client.post("/v1/tts", json={"text": "Hello."})
    assert (r.status_code, r.json()) == (503, {"detail": POCKET, "code": "engine_unavailable", "state": "missing"})
    assert_no_server_detail(r.text, tmp_path)


def test_an_engine_stopped_while_ready_says_not_running(tmp_path) -> None:
    engine = FakeTtsEngine(open_error=EngineUnavailable("the Piper worker pool is closed", engine="piper"))
    with tts_client(tmp_path, engine) as client:
        r = client.post("/v1/tts", json={"text": "Hello."})
    assert (r.status_code, r.json()) == (503, {
        "detail": "Piper is not available on this gateway (not running); an admin can see why at GET /v1/engines",
        "code": "engine_unavailable"})


# ---- dictation


def test_transcribing_a_file(tmp_path) -> None:
    with dictation_client(tmp_path, missing_asr(tmp_path)) as client:
        r = client.post("/v1/audio/transcriptions", data={"model": "whisper-1"},
                        files={"file": ("a.wav", WAV, "audio/wav")})
    assert (r.status_code, r.json()) == (503, {"detail": ASR, "code": "engine_unavailable", "state": "missing"})
    assert_no_server_detail(r.text, tmp_path)

FLUX = "/v2/listen?model=flux-general-en&sample_rate=16000"


def realtime_error(message: str) -> dict:
    return {"type": "server_error", "code": "engine_unavailable", "message": message, "param": None,
            "event_id": None}


@pytest.mark.parametrize(("url", "expected"), [
    ("/v1/dictation", {"type": "error", "code": "engine_unavailable", "message": ASR, "retryable": False,
                       "state": "missing"}),
    ("/v1/listen", {"type": "Error", "variant": "engine_unavailable", "description": ASR,
                    "code": "engine_unavailable"}),
    (FLUX, {"type": "Error", "sequence_id": 0, "code": "ENGINE_UNAVAILABLE", "description": ASR}),
    (REALTIME, {"type": "error", "error": realtime_error(ASR)}),
])
def test_dictation_over_a_socket(tmp_path, url, expected) -> None:
    with dictation_client(tmp_path, missing_asr(tmp_path)) as client, client.websocket_connect(url) as ws:
        error = receive(ws)
        error.pop("event_id", None)  # the realtime front numbers its events
        assert (error, close_code(ws)) == (expected, (1011, ASR))
    assert_no_server_detail(repr(error), tmp_path)


@pytest.mark.parametrize(("url", "expected"), [
    ("/v1/dictation", {"type": "error", "code": "engine_unavailable", "message": NO_ASR, "retryable": False}),
    ("/v1/listen", {"type": "Error", "variant": "engine_unavailable", "description": NO_ASR,
                    "code": "engine_unavailable"}),
    (FLUX, {"type": "Error", "sequence_id": 0, "code": "ENGINE_UNAVAILABLE", "description": NO_ASR}),
    (REALTIME, {"type": "error", "error": realtime_error(NO_ASR)}),
])
def test_dictation_on_a_gateway_without_asr(tmp_path, url, expected) -> None:
    with make_client(tmp_path) as client, client.websocket_connect(url) as ws:
        error = receive(ws)
        error.pop("event_id", None)
        assert (error, close_code(ws)) == (expected, (1011, NO_ASR))


# ---- the server's log


def warnings_about(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "voxgate.engines" and r.levelno == logging.WARNING and f"engine {name} " in r.getMessage()]


def test_the_log_gets_the_detail_and_hint_once_however_many_refusals(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="voxgate.engines")
    with make_client(tmp_path, tts={"pocket": missing_pocket(tmp_path)}, asr=missing_asr(tmp_path),
                     engines=("pocket", "asr")) as client:
        wait_until(lambda: warnings_about(caplog, "pocket") and warnings_about(caplog, "asr"), "the warnings")
        for _ in range(3):
            assert client.post("/v1/tts", json={"text": "Hello."}).status_code == 503
            with client.websocket_connect("/v1/dictation") as ws:
                assert close_code(ws)[0] == 1011
    assert warnings_about(caplog, "pocket") == [
        (f"engine pocket is not available (missing): Pocket TTS weights not found: {weights(tmp_path)}; "
        f"to fix it: {PULL}"),
    ]
    assert warnings_about(caplog, "asr") == [
        (f"engine asr is not available (missing): no Whisper model in {tmp_path}/models/whisper; "
        "to fix it: voxgate models install whisper-base"),
    ]


def test_the_log_is_written_again_only_when_the_status_changes(caplog) -> None:
    caplog.set_level(logging.INFO, logger="voxgate.engines")
    log = EngineLog()
    missing = EngineStatus(EngineState.MISSING, "no model.safetensors in /data/models/pocket", "voxgate models pull")
    failed = EngineStatus(EngineState.FAILED, "OmniVoice failed to load: out of memory")
    for status in (EngineStatus(EngineState.LOADING), missing, missing, EngineStatus(EngineState.LOADING),
                   missing, failed, failed, EngineStatus(EngineState.READY), EngineStatus(EngineState.READY), failed):
        log.observe("pocket", status)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", ("engine pocket is not available (missing): no model.safetensors in /data/models/pocket; "
                     "to fix it: voxgate models pull")),
        ("WARNING", "engine pocket is not available (failed): OmniVoice failed to load: out of memory"),
        ("INFO", "engine pocket is ready again"),
        ("WARNING", "engine pocket is not available (failed): OmniVoice failed to load: out of memory"),
    ]


# ---- an ASR model configured as a local path


def asr_at_a_path(tmp_path) -> FakeSidecar:
    asr = FakeSidecar()
    asr.model_name = f"{tmp_path}/models/whisper-small-ct2"
    return asr


def test_dictation_names_a_local_model_by_its_last_component(tmp_path) -> None:
    with dictation_client(tmp_path, asr_at_a_path(tmp_path)) as client:
        with client.websocket_connect("/v1/dictation") as ws:
            ready = receive(ws)
            assert (ready["type"], ready["model"]) == ("ready", "whisper-small-ct2")
            ws.send_json({"type": "end"})
        with client.websocket_connect("/v1/dictation?language=de") as ws:
            message = ("language: the ASR model whisper-small-ct2 does not support 'de' (available: en); an admin "
                       "can install multilingual Whisper base")
            assert receive(ws) == {"type": "error", "code": "unsupported_language", "message": message,
                                   "retryable": False}
            assert close_code(ws) == (4400, message[:123])
        with client.websocket_connect("/v1/listen") as ws:
            ws.send_json({"type": "CloseStream"})
            metadata = receive(ws)
    assert [info["name"] for info in metadata["model_info"].values()] == ["whisper-small-ct2"]
    assert str(tmp_path) not in repr(metadata)
