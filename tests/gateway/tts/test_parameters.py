"""Every TTS parameter is honoured or refused by name: the per-utterance options
an engine does not honour (``seed`` on Piper, ``language``/``instruct`` on
Pocket), unknown HTTP body fields and query parameters, and the OpenAI speech
route's ``model``, ``instructions``, ``voice`` and ``stream_format: "sse"``.
An unknown field of a /v1/tts socket message is ignored, as the protocol says."""

from __future__ import annotations

import base64
import json

import pytest
from starlette.testclient import TestClient

from engines.base import SynthesisOptions, TtsInfo
from engines.options import unsupported_option
from gateway.audio import Encoding, encode
from tests.gateway.fakes import FakeTtsEngine, expected_audio, frames_for
from tests.gateway.helpers import LOOPBACK, make_app
from tests.support.sockets import close_code, receive

# the options each real engine declares (engines/*/engine.py)
POCKET, PIPER, OMNIVOICE = ("seed", "temperature"), ("speaker",), ("seed", "language", "instruct")


def engines() -> dict[str, FakeTtsEngine]:
    return {"pocket": FakeTtsEngine(options=POCKET), "piper": FakeTtsEngine(engine_id="piper", options=PIPER),
            "omnivoice": FakeTtsEngine(engine_id="omnivoice", options=OMNIVOICE)}


@pytest.fixture
def fakes() -> dict[str, FakeTtsEngine]:
    return engines()


@pytest.fixture
def client(tmp_path, fakes):
    with TestClient(make_app(tmp_path, tts=fakes, tts_engine="pocket"), client=LOOPBACK) as c:
        yield c


# ---- the engines' own check


@pytest.mark.parametrize(("options", "engine_options", "message"), [
    (SynthesisOptions(seed=3), PIPER,
     ("seed: the piper engine cannot be seeded (its output does not depend on a seed it can be given); "
     "options it takes: speaker")),
    (SynthesisOptions(extra={"language": "de"}), POCKET,
     ("language: the pocket engine takes no language option (its voices set the language); "
     "options it takes: seed, temperature")),
    (SynthesisOptions(extra={"instruct": "calm"}), POCKET,
     "instruct: the pocket engine takes no voice description (instruct); options it takes: seed, temperature"),
    (SynthesisOptions(extra={"speaker": "2"}), OMNIVOICE,
     ("speaker: the omnivoice engine has no speaker option (no multi-speaker voices); "
     "options it takes: seed, language, instruct")),
    (SynthesisOptions(temperature=0.5), PIPER,
     "temperature: the piper engine has no sampling temperature; options it takes: speaker"),
    (SynthesisOptions(extra={"pitch": "high"}), OMNIVOICE,
     "pitch: the omnivoice engine has no such option; options it takes: seed, language, instruct"),
    (SynthesisOptions(seed=3, extra={"language": "de", "instruct": "calm"}), OMNIVOICE, None),
    (SynthesisOptions(), (), None),
])
def test_an_option_the_engine_does_not_list_is_refused(options, engine_options, message):
    engine_id = {PIPER: "piper", POCKET: "pocket", OMNIVOICE: "omnivoice"}.get(engine_options, "x")
    info = TtsInfo(id=engine_id, sample_rate=24000, frame_samples=1920, options=engine_options)
    assert unsupported_option(info, options) == message


# ---- the /v1/tts socket


def test_speak_with_an_option_the_engine_lacks_gets_an_error_and_nothing_is_spoken(client, fakes):
    with client.websocket_connect("/v1/tts?engine=piper") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "Seeded.", "seed": 4})
        assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False, "message":
                               "speak.seed: the piper engine cannot be seeded (its output does not depend on a "
                               "seed it can be given); options it takes: speaker"}
        ws.send_json({"type": "speak", "text": "Plain.", "id": "p"})
        assert receive(ws)["type"] == "start"
    assert [s.text for s in fakes["piper"].streams] == ["Plain."]


def test_speak_with_instruct_on_pocket_is_refused(client, fakes):
    with client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "Hi.", "instruct": "whispering"})
        assert receive(ws)["message"] == ("speak.instruct: the pocket engine takes no voice description (instruct); "
                                          "options it takes: seed, temperature")
    assert fakes["pocket"].streams == []


def test_a_field_the_protocol_does_not_define_is_ignored_and_the_session_goes_on(client, fakes):
    """PROTOCOL.md: unknown fields of a native socket message are ignored."""
    with client.websocket_connect("/v1/tts") as ws:
        receive(ws)
        ws.send_json({"type": "speak", "text": "Hi.", "id": "u1", "speed": 1.2, "style": {"x": 1}})
        ws.send_json({"type": "flush", "id": "f1", "voice": "alba"})
        ws.send_json({"type": "end", "flush": True})
        events = []
        while not events or events[-1]["type"] not in ("closed", "error"):
            message = receive(ws)
            if isinstance(message, dict):
                events.append(message)
        assert [e["type"] for e in events] == ["start", "end", "flushed", "closed"]
        assert (events[0]["id"], events[2]["id"]) == ("u1", "f1")
        assert close_code(ws) == (1000, "")
    assert [s.text for s in fakes["pocket"].streams] == ["Hi."]


@pytest.mark.parametrize(("path", "reason"), [
    ("/v1/tts?speed=2", "speed: not a parameter here; known: engine, voice, sample_rate, encoding, resumable"),
    ("/v1/tts?seed=1", "seed: not a parameter here; known: engine, voice, sample_rate, encoding, resumable"),
])
def test_an_unknown_query_parameter_closes_the_socket_naming_it(client, path, reason):
    with client.websocket_connect(path) as ws:
        assert receive(ws) == {"type": "error", "code": "bad_request", "message": reason, "retryable": False}
        assert close_code(ws) == (4400, reason)


def test_credentials_in_the_query_are_not_refused_as_unknown(client):
    with client.websocket_connect("/v1/tts?engine=piper&ticket=") as ws:
        assert receive(ws)["type"] == "ready"


# ---- POST /v1/tts


def test_post_tts_seed_on_piper_is_refused_and_on_pocket_decides_the_audio(client):
    r = client.post("/v1/tts", json={"text": "Seeded.", "engine": "piper", "seed": 4})
    assert (r.status_code, r.json()["detail"]) == (400, ("seed: the piper engine cannot be seeded (its output does "
                                                        "not depend on a seed it can be given); options it takes: "
                                                        "speaker"))
    r = client.post("/v1/tts", json={"text": "Seeded.", "seed": 4, "format": "pcm_s16le"})
    assert r.content == encode(expected_audio("Seeded.", seed=4), Encoding.S16LE)


def test_post_tts_refuses_an_unknown_field(client):
    r = client.post("/v1/tts", json={"text": "Hi.", "speed": 1.2})
    assert (r.status_code, r.json()["detail"]) == (400, ("speed: not a field of this request; the fields are: text, "
                                                        "engine, voice, format, sample_rate, seed, language, instruct"))


# ---- POST /v1/audio/speech


def test_instructions_reach_an_engine_that_takes_a_voice_description(client, fakes):
    r = client.post("/v1/audio/speech", json={"model": "omnivoice", "input": "Hi.", "instructions": "female, whisper",
                                              "response_format": "pcm"})
    assert r.status_code == 200
    assert fakes["omnivoice"].streams[0].options.extra == {"instruct": "female, whisper"}


def test_instructions_on_an_engine_without_them_are_refused_naming_one_that_has_them(client, fakes):
    r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "instructions": "Speak cheerfully."})
    assert (r.status_code, r.json()["detail"]) == (400, ("instructions: the pocket engine cannot follow instructions "
                                                        "(it takes no voice description); use model=omnivoice, or "
                                                        "leave instructions out"))
    r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "instructions": "  "})
    assert r.status_code == 200  # blank instructions are none, as at OpenAI
    assert [s.options.extra for s in fakes["pocket"].streams] == [{}]


def test_instructions_without_any_engine_that_follows_them(tmp_path):
    with TestClient(make_app(tmp_path, tts={"pocket": FakeTtsEngine(options=POCKET)}, tts_engine="pocket"),
                    client=LOOPBACK) as client:
        r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "instructions": "Slowly."})
    assert r.json()["detail"] == ("instructions: the pocket engine cannot follow instructions (it takes no voice "
                                  "description); no engine on this server follows instructions, or leave "
                                  "instructions out")


@pytest.mark.parametrize(("model", "engine"), [
    ("tts-1", "pocket"), ("tts-1-hd", "pocket"), ("gpt-4o-mini-tts", "pocket"), ("piper", "piper"), (None, "pocket")])
def test_model_names_an_engine_or_an_openai_model(client, fakes, model, engine):
    body = {"input": "Hi.", "response_format": "pcm", **({"model": model} if model else {})}
    assert client.post("/v1/audio/speech", json=body).status_code == 200
    assert [e for e, fake in fakes.items() if fake.streams] == [engine]


def test_an_unknown_model_is_refused_with_the_list(client):
    r = client.post("/v1/audio/speech", json={"model": "eleven_v3", "input": "Hi."})
    assert (r.status_code, r.json()["detail"]) == (400, ("model: 'eleven_v3' is not a model here; use an engine "
                                                        "(omnivoice, piper, pocket) or one of OpenAI's (tts-1, "
                                                        "tts-1-hd, gpt-4o-mini-tts, gpt-4o-mini-tts-2025-12-15), "
                                                        "which speak with the default engine (pocket)"))


@pytest.mark.parametrize(("body", "detail"), [
    ({"model": "tts-1", "input": "Hi.", "seed": 3},
     ("seed: not a field of this request; the fields are: model, input, voice, instructions, response_format, speed, "
     "stream_format")),
    ({"model": "tts-1", "input": "Hi.", "voice": {"name": "alba"}},
     "voice: an object must carry the voice's \"id\" as a string"),
    ({"model": 5, "input": "Hi."}, "model: must be a string"),
    ({"model": "tts-1", "input": "Hi.", "instructions": 5}, "instructions: must be a string"),
    ({"model": "tts-1", "input": "Hi.", "instructions": "x" * 501}, "instructions: longer than 500 characters"),
])
def test_speech_fields_refused_by_name(client, body, detail):
    r = client.post("/v1/audio/speech", json=body)
    assert (r.status_code, r.json()["detail"]) == (400, detail)


def test_a_stock_openai_voice_speaks_with_the_default_voice_and_a_voice_object_is_read(client, fakes):
    for voice in ("alloy", {"id": "marius"}):
        r = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "voice": voice,
                                                  "response_format": "pcm"})
        assert r.status_code == 200
    assert [s.voice for s in fakes["pocket"].streams] == ["alba", "marius"]


def test_stream_format_sse_sends_the_audio_as_openai_events(client):
    text = "Streamed as events."
    r = client.post("/v1/audio/speech", json={"model": "gpt-4o-mini-tts", "input": text, "voice": "alloy",
                                              "response_format": "pcm", "stream_format": "sse"})
    assert (r.status_code, r.headers["content-type"].split(";")[0]) == (200, "text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in r.text.split("\n\n") if line]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    assert events[-1] == {"type": "speech.audio.done",
                          "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert audio == encode(expected_audio(text), Encoding.S16LE)
    assert len(audio) == frames_for(text) * 1920 * 2
