"""Every field of POST /v1/audio/transcriptions is honoured or refused by name:
``model`` (the recognizer's name and OpenAI's), ``prompt`` and ``keywords[]``, ``temperature``,
``stream``, ``chunking_strategy``, ``include[]``, ``timestamp_granularities[]``,
the srt and vtt formats, and fields OpenAI does not define."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.audio import write_wav
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar

RESULT = {"ev": "transcription", "req": "r1", "text": "hello there. general kenobi", "language": "en",
          "duration": 3725.5,
          "segments": [{"id": 0, "start": 0.0, "end": 1.25, "text": " hello there."},
                       {"id": 1, "start": 3723.0, "end": 3725.5, "text": " general kenobi"}],
          "words": []}
WAV = write_wav(np.zeros(8000, dtype=np.float32), 8000)
MODELS = "whisper-1, gpt-transcribe, gpt-4o-transcribe, gpt-4o-mini-transcribe, gpt-4o-mini-transcribe-2025-12-15"


def post(client, data, extra_fields=()):
    """``extra_fields``: (name, value) pairs a form may repeat, such as ``include[]``."""
    parts = [("file", ("a.wav", WAV, "audio/wav")), *((name, (None, value)) for name, value in extra_fields)]
    return client.post("/v1/audio/transcriptions", data=data, files=parts)


@pytest.mark.parametrize("model", ["whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "tiny.en"])
def test_the_recognizers_name_and_openais_models_are_served(tmp_path, model):
    with dictation_client(tmp_path, FakeSidecar(transcription=RESULT)) as client:
        r = post(client, {"model": model, "temperature": "0", "stream": "false", "chunking_strategy": "auto"})
    assert (r.status_code, r.json()) == (200, {"text": "hello there. general kenobi"})


@pytest.mark.parametrize(("data", "extra", "detail"), [
    ({"model": "nova-3"}, (),
     (f"model: 'nova-3' is not a model here; use 'tiny.en' or one of OpenAI's ({MODELS}), all transcribed by this "
     "server's tiny.en")),
    ({"model": "gpt-4o-transcribe-diarize"}, (),
     (f"model: 'gpt-4o-transcribe-diarize' is not a model here; use 'tiny.en' or one of OpenAI's ({MODELS}), all "
     "transcribed by this server's tiny.en")),
    ({"model": "whisper-1", "prompt": "x" * 801}, (), "prompt: 801 characters; a prompt holds at most 800"),
    ({"model": "whisper-1", "prompt": "Kenobi <|endoftext|>"}, (),
     "prompt: holds '<'; a prompt holds no control characters and none of <>|"),
    ({"model": "whisper-1"}, (("keywords[]", "Obi-Wan, Kenobi"),),
     "keywords[]: 'Obi-Wan, Kenobi' holds ','; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ({"model": "whisper-1", "temperature": "0.4"}, (),
     "temperature: 0.4 is not supported; the recognizer here decodes without sampling (temperature 0)"),
    ({"model": "whisper-1", "temperature": "warm"}, (), "temperature: 'warm' is not a number"),
    ({"model": "whisper-1", "stream": "true"}, (),
     ("stream: a streamed transcription of a file is not served here; use stream=false, or the /v1/dictation "
     "socket for live text")),
    ({"model": "whisper-1", "chunking_strategy": '{"type": "server_vad"}'}, (),
     ("chunking_strategy: only \"auto\" is supported (the file is cut at the pauses the server's voice detector "
     "finds)")),
    ({"model": "whisper-1"}, (("include[]", "logprobs"),),
     "include[]: not supported; logprobs are not produced here; leave include out"),
    ({"model": "whisper-1"}, (("known_speaker_names[]", "ann"),),
     "known_speaker_names[]: not supported; speakers are not told apart here (no diarization)"),
    ({"model": "whisper-1", "response_format": "json"}, (("timestamp_granularities[]", "word"),),
     "timestamp_granularities[]: timestamps come only with response_format=verbose_json"),
    ({"model": "whisper-1", "response_format": "verbose_json"}, (("timestamp_granularities[]", "char"),),
     "timestamp_granularities[]: 'char' is not one of: word, segment"),
    ({"model": "whisper-1", "speed": "2"}, (),
     ("speed: not a field of this request; the fields are: file, model, language, prompt, keywords[], "
     "response_format, temperature, timestamp_granularities[], stream, chunking_strategy, include[]")),
])
def test_fields_that_cannot_be_honoured_are_refused_by_name(tmp_path, data, extra, detail):
    fake = FakeSidecar(transcription=RESULT)
    with dictation_client(tmp_path, fake) as client:
        r = post(client, data, extra)
    assert (r.status_code, r.json()) == (400, {"detail": detail, "code": "bad_request"})
    assert fake.transcribe_calls == []


def test_the_prompt_and_keywords_reach_the_recognizer_as_its_context_and_the_keywords_as_its_spellings(tmp_path):
    fake = FakeSidecar(transcription=RESULT)
    with dictation_client(tmp_path, fake) as client:
        r = post(client, {"model": "whisper-1", "prompt": "General  Kenobi speaking."},
                 (("keywords[]", "Kenobi"), ("keywords[]", "Obi-Wan")))
    assert r.status_code == 200
    assert fake.transcribe_calls == [{"samples": 16000, "language": None, "word_timestamps": False,
                                      "prompt": "General Kenobi speaking. Kenobi, Obi-Wan.",
                                      "terms": ("Kenobi", "Obi-Wan")}]


def test_segment_granularity_gives_segments_without_words(tmp_path):
    fake = FakeSidecar(transcription=RESULT)
    with dictation_client(tmp_path, fake) as client:
        r = post(client, {"model": "whisper-1", "response_format": "verbose_json"},
                 (("timestamp_granularities[]", "segment"),))
    assert r.status_code == 200 and "words" not in r.json() and r.json()["segments"] == RESULT["segments"]
    assert fake.transcribe_calls[-1]["word_timestamps"] is False


def test_srt_and_vtt_are_the_segments_as_cues(tmp_path):
    with dictation_client(tmp_path, FakeSidecar(transcription=RESULT)) as client:
        srt = post(client, {"model": "whisper-1", "response_format": "srt"})
        vtt = post(client, {"model": "whisper-1", "response_format": "vtt"})
    assert (srt.status_code, srt.headers["content-type"].split(";")[0]) == (200, "application/x-subrip")
    assert srt.text == ("1\n00:00:00,000 --> 00:00:01,250\nhello there.\n\n"
                        "2\n01:02:03,000 --> 01:02:05,500\ngeneral kenobi\n")
    assert (vtt.status_code, vtt.headers["content-type"].split(";")[0]) == (200, "text/vtt")
    assert vtt.text == ("WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nhello there.\n\n"
                        "01:02:03.000 --> 01:02:05.500\ngeneral kenobi\n")
