"""Every ElevenLabs field is honoured, refused by name, or accepted with its
documented meaning: ``voice_settings``, ``generation_config``, ``model_id``,
``language_code``, the HTTP body's conditioning fields, unknown fields."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from gateway.errors import BadMessage
from gateway.fronts.elevenlabs.messages import parse_client_message
from gateway.protocol.tts import TextLimits
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import LOOPBACK, make_app

LIMITS = TextLimits()
SPEECH = "/v1/text-to-speech/alba/stream?output_format=pcm_24000"


@pytest.fixture
def fakes() -> dict[str, FakeTtsEngine]:
    return {"pocket": FakeTtsEngine(options=("seed", "temperature")),
            "piper": FakeTtsEngine(engine_id="piper", options=("speaker",)),
            "omnivoice": FakeTtsEngine(engine_id="omnivoice", options=("seed", "language", "instruct"))}


@pytest.fixture
def client(tmp_path, fakes):
    with TestClient(make_app(tmp_path, tts=fakes, tts_engine="pocket"), client=LOOPBACK) as c:
        yield c


@pytest.mark.parametrize(("raw", "message"), [
    ('{"text": " ", "voice_settings": {"stability": 0.5}}',
     "voice_settings.stability: not supported; the engines here take no voice settings"),
    ('{"text": " ", "voice_settings": {"speed": 1.2}}',
     "voice_settings.speed: not supported; this server speaks at speed 1.0 only"),
    ('{"text": " ", "generation_config": {"temperature": 0.3}}',
     "generation_config.temperature: not supported; only chunk_length_schedule is taken"),
    ('{"text": "Hi.", "model_id": "eleven_v3"}',
     ("model_id: not a field of a message here; the fields are: text, context_id, flush, close_context, "
     "close_socket, try_trigger_generation, voice_settings, generation_config, xi_api_key, xi-api-key, "
     "authorization")),
])
def test_socket_message_fields_that_cannot_be_honoured_are_refused(raw, message):
    with pytest.raises(BadMessage) as info:
        parse_client_message(raw, LIMITS)
    assert info.value.message == message


def test_the_sdks_opening_message_is_taken():
    raw = ('{"text": " ", "try_trigger_generation": true, "voice_settings": null, '
           '"generation_config": {"chunk_length_schedule": [50]}}')
    assert parse_client_message(raw, LIMITS).text == " "


def error(r) -> tuple[int, str]:
    return r.status_code, r.json()["detail"]["message"]


def test_language_code_reaches_an_engine_that_takes_a_language(client, fakes):
    r = client.post(SPEECH, json={"text": "Hallo.", "model_id": "omnivoice", "language_code": "de"})
    assert r.status_code == 200
    assert fakes["omnivoice"].streams[0].options.extra == {"language": "de"}


def test_language_code_of_the_engines_own_language_is_taken_and_another_refused(client, fakes):
    assert client.post(SPEECH, json={"text": "Hi.", "language_code": "en"}).status_code == 200
    assert fakes["pocket"].streams[0].options.extra == {}
    r = client.post(SPEECH, json={"text": "Hallo.", "language_code": "de"})
    assert error(r) == (400, "language_code: the pocket engine speaks en only, not 'de'")


@pytest.mark.parametrize(("query", "body", "message"), [
    ("", {"text": "Hi.", "model_id": "nova"},
     ("model_id: 'nova' is not a model here; use an engine (omnivoice, piper, pocket) or an ElevenLabs model "
     "(eleven_*), which speaks with the default engine (pocket)")),
    ("", {"text": "Hi.", "previous_text": "Before."},
     "previous_text: not supported; the engines here are not conditioned on neighbouring text"),
    ("", {"text": "Hi.", "pronunciation_dictionary_locators": [{"id": "d"}]},
     "pronunciation_dictionary_locators: not supported; pronunciation dictionaries are not served here"),
    ("", {"text": "Hi.", "voice_settings": {"style": 0.2}},
     "voice_settings.style: not supported; the engines here take no voice settings"),
    ("", {"text": "Hi.", "apply_text_normalization": "on"},
     "apply_text_normalization: 'on' is not supported; each engine prepares text its own way (auto)"),
    ("", {"text": "Hi.", "stream": True},
     ("stream: not a field of this request; the fields are: text, model_id, language_code, voice_settings, seed, "
     "apply_text_normalization, apply_language_text_normalization, pronunciation_dictionary_locators, "
     "previous_text, next_text, previous_request_ids, next_request_ids, use_pvc_as_ivc")),
    ("&speed=2", {"text": "Hi."},
     "speed: not a parameter here; known: output_format, enable_logging, optimize_streaming_latency"),
    ("", {"text": "Hi.", "model_id": "piper", "seed": 3},
     ("seed: the piper engine cannot be seeded (its output does not depend on a seed it can be given); options it "
     "takes: speaker")),
])
def test_http_fields_that_cannot_be_honoured_are_refused(client, fakes, query, body, message):
    r = client.post(SPEECH + query, json=body)
    assert error(r) == (400, message)
    assert all(not fake.streams for fake in fakes.values())
