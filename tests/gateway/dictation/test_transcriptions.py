"""POST /v1/audio/transcriptions with a fake sidecar: formats, validation, errors."""

from __future__ import annotations

import numpy as np
import pytest

from engines.base import EngineState
from gateway.audio import write_wav
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar

RESULT = {"ev": "transcription", "req": "r1", "text": "hello there", "language": "en", "duration": 1.0,
          "segments": [{"id": 0, "start": 0.0, "end": 1.0, "text": "hello there"}],
          "words": [{"word": "hello", "start": 0.1, "end": 0.4, "probability": 0.9}]}
WAV = write_wav(np.zeros(8000, dtype=np.float32), 8000)


def post(client, data=None, files=None):
    return client.post("/v1/audio/transcriptions", data=data or {"model": "whisper-1"},
                       files=files if files is not None else {"file": ("a.wav", WAV, "audio/wav")})


def test_json_is_the_default_format(tmp_path):
    fake = FakeSidecar(transcription=RESULT)
    with dictation_client(tmp_path, fake) as client:
        r = post(client)
    assert (r.status_code, r.json()) == (200, {"text": "hello there"})
    assert fake.transcribe_calls == [{"samples": 16000, "language": None, "word_timestamps": False}]


def test_text_and_verbose_json_formats(tmp_path):
    fake = FakeSidecar(transcription=RESULT)
    with dictation_client(tmp_path, fake) as client:
        text = post(client, {"response_format": "text"})
        verbose = post(client, {"response_format": "verbose_json", "language": "en",
                                "timestamp_granularities[]": "word"})
    assert (text.status_code, text.text, text.headers["content-type"]) == (200, "hello there\n",
                                                                           "text/plain; charset=utf-8")
    assert verbose.json() == {"task": "transcribe", "language": "en", "duration": 1.0, "text": "hello there",
                              "segments": RESULT["segments"], "words": RESULT["words"]}
    assert fake.transcribe_calls[-1] == {"samples": 16000, "language": "en", "word_timestamps": True}


@pytest.mark.parametrize(("data", "files", "status", "body"), [
    ({"response_format": "diarized_json"}, None, 400,
     {"detail": "response_format: 'diarized_json' is not supported (speakers are not told apart here); use one "
                "of: json, text, verbose_json, srt, vtt", "code": "bad_request"}),
    ({"model": "whisper-1"}, {"other": ("a.wav", WAV, "audio/wav")}, 400,
     {"detail": "other: not a field of this request; the fields are: file, model, language, prompt, "
                "keywords[], response_format, temperature, timestamp_granularities[], stream, chunking_strategy, include[]",
      "code": "bad_request"}),
    ({"language": "en"}, {"model": (None, "whisper-1")}, 400,
     {"detail": "file: missing; send the audio as a multipart file field named 'file'", "code": "bad_request"}),
    ({"model": "whisper-1"}, {"file": ("a.mp3", b"ID3\x03 not an mp3", "audio/mpeg")}, 400,
     {"detail": "file: the file cannot be read as MP3: Invalid data found when processing input",
      "code": "bad_audio"}),
    ({"model": "whisper-1"}, {"file": ("a.txt", b"plain text", "text/plain")}, 400,
     {"detail": "file: not a recognised audio file (accepted: WAV, FLAC, MP3, Ogg (Opus, Vorbis, FLAC), WebM, "
                "M4A/MP4 or AAC)", "code": "bad_audio"}),
    ({"language": "de"}, None, 400,
     {"detail": "language: the ASR model tiny.en does not support 'de' (available: en)",
      "code": "unsupported_language"}),
])
def test_bad_requests_name_the_field(tmp_path, data, files, status, body):
    with dictation_client(tmp_path, FakeSidecar(transcription=RESULT)) as client:
        r = post(client, data, files)
    assert (r.status_code, r.json()) == (status, body)


def test_a_json_body_is_refused(tmp_path):
    with dictation_client(tmp_path, FakeSidecar(transcription=RESULT)) as client:
        r = client.post("/v1/audio/transcriptions", json={"file": "x"})
    assert (r.status_code, r.json()) == (400, {"detail": "the body must be multipart/form-data with a 'file' field",
                                               "code": "bad_request"})


def test_a_body_over_25_mb_is_413(tmp_path):
    with dictation_client(tmp_path, FakeSidecar(transcription=RESULT)) as client:
        r = post(client, files={"file": ("a.wav", b"\0" * (26 * 1024 * 1024), "audio/wav")})
    assert r.status_code == 413
    assert r.json()["code"] == "too_large"


def test_missing_asr_is_503_naming_its_state(tmp_path):
    fake = FakeSidecar(state=EngineState.MISSING, detail="model missing", hint="voxgate models install whisper-base")
    with dictation_client(tmp_path, fake) as client:
        r = post(client)
    assert r.status_code == 503
    assert r.json() == {"detail": "Speech recognition is not available on this gateway (not installed); an admin can "
                                  "see why at GET /v1/engines", "code": "engine_unavailable", "state": "missing"}
