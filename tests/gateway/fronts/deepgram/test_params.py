"""Every Deepgram query parameter (params.py) is honoured, refused by name, or
accepted with its documented meaning; the queries the agent frameworks send by
default pass; a bad one on /v1/listen or /v1/speak gets Deepgram's ``Error``
message naming it, then close 4400."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from gateway.errors import BadRequest
from gateway.fronts.deepgram.params import parse_listen_params, parse_speak_params
from tests.gateway.helpers import dictation_client, tts_client
from tests.support.sockets import close_code, receive

# what livekit-plugins-deepgram 1.8.9's STT and pipecat-ai 1.14's DeepgramSTTService
# put in the /v1/listen URL with their defaults (their source: live_config, _build_connect_kwargs)
LIVEKIT_LISTEN = ("model=nova-3&punctuate=true&smart_format=false&no_delay=true&interim_results=true&encoding=linear16"
                  "&vad_events=true&sample_rate=16000&channels=1&endpointing=25&filler_words=true"
                  "&profanity_filter=false&numerals=false&mip_opt_out=false&language=en-US")
PIPECAT_LISTEN = ("detect_entities=false&diarize=false&dictation=false&interim_results=true&numerals=false"
                  "&punctuate=true&smart_format=false&model=nova-3-general&language=en&encoding=linear16&channels=1"
                  "&multichannel=false&sample_rate=16000")
LIVEKIT_SPEAK = "encoding=linear16&model=aura-2-andromeda-en&sample_rate=24000&mip_opt_out=false"
APPS = {"/v1/listen": dictation_client, "/v1/speak": tts_client}


def query(text: str) -> dict[str, str]:
    return dict(parse_qsl(text))


@pytest.mark.parametrize("text", [LIVEKIT_LISTEN, PIPECAT_LISTEN])
def test_the_frameworks_default_listen_queries_are_served(text):
    params = parse_listen_params(query(text))
    assert (params.encoding, params.sample_rate, params.dictation.language, params.interim_results) == \
        ("linear16", 16000, "en", True)


def test_the_frameworks_default_speak_query_is_served():
    assert parse_speak_params(query(LIVEKIT_SPEAK)).sample_rate == 24000


def test_detect_language_detects():
    assert parse_listen_params(query("language=en&detect_language=true")).dictation.language == "auto"


@pytest.mark.parametrize(("text", "message"), [
    ("smart_format=true", ("smart_format=true: not supported; no formatting pass runs after the recognizer "
                          "(use smart_format=false or leave it out)")),
    ("punctuate=false", ("punctuate=false: not supported; the recognizer always punctuates and capitalises "
                        "(use punctuate=true or leave it out)")),
    ("diarize=true", ("diarize=true: not supported; speakers are not told apart here (use diarize=false or leave "
                     "it out)")),
    ("profanity_filter=true", ("profanity_filter=true: not supported; no profanity filter runs here (use "
                              "profanity_filter=false or leave it out)")),
    ("multichannel=true", ("multichannel=true: not supported; only one channel is transcribed (use "
                          "multichannel=false or leave it out)")),
    ("keywords=um:-10", ("keywords: 'um:-10' has boost -10; the recognizer here can favour a word but not suppress "
                         "it (use a positive boost, or leave the word out)")),
    ("keywords=um:0", ("keywords: 'um:0' has boost 0; the recognizer here can favour a word but not suppress "
                       "it (use a positive boost, or leave the word out)")),
    ("keyterm=" + "x" * 51, f"keyterm: '{'x' * 20}'... is 51 characters; a term holds at most 50"),
    ("keyterm=a<b", "keyterm: 'a<b' holds '<'; a term holds letters, digits, spaces and '’-.&+/#@_:"),
    ("redact=pci", "redact: not supported; no redaction runs here"),
    ("callback=https://example.com", "callback: not supported; results go back over this socket only"),
    ("version=2024-01-09", "version: '2024-01-09' is not served; the one version here is latest"),
    ("no_delay=soon", "no_delay: 'soon' is not a boolean (use true or false)"),
    ("channels=2", "channels: 2 is not supported; send mono audio (channels=1)"),
])
def test_listen_parameters_that_cannot_be_honoured_are_refused(text, message):
    with pytest.raises(BadRequest) as info:
        parse_listen_params(query(text))
    assert info.value.message == message


def test_keyterms_and_keywords_become_the_streams_terms():
    from starlette.datastructures import QueryParams

    params = parse_listen_params(QueryParams("model=nova-3&keyterm=ComfyUI&keyterm=Siobhan%20Kelly"
                                             "&keywords=Llanelli:2&keywords=Zyxel&keyterm=ComfyUI"))
    assert params.dictation.prompt == "ComfyUI, Siobhan Kelly, Llanelli, Zyxel."


def test_more_keyterms_than_the_limit_are_refused():
    from starlette.datastructures import QueryParams

    with pytest.raises(BadRequest) as info:
        parse_listen_params(QueryParams("&".join(f"keyterm=term{n}" for n in range(51))))
    assert info.value.message == "keyterm: more than 50 terms"


def test_an_unknown_listen_parameter_is_refused_with_the_known_ones():
    with pytest.raises(BadRequest) as info:
        parse_listen_params(query("pitch=high"))
    assert info.value.message.startswith("pitch: not a parameter here; known: encoding, sample_rate, channels, "
                                         "language, detect_language, model, interim_results, endpointing, ")


@pytest.mark.parametrize(("text", "message"), [
    ("speed=1.5", "speed: '1.5' is not supported; this server speaks at speed 1.0 only"),
    ("bit_rate=48000", ("bit_rate: not supported; only compressed audio has a bit rate, and this socket sends "
                       "linear16, mulaw or alaw")),
    ("voice=alba", ("voice: not a parameter here; known: encoding, sample_rate, container, model, speed, bit_rate, "
                   "mip_opt_out")),
])
def test_speak_parameters_that_cannot_be_honoured_are_refused(text, message):
    with pytest.raises(BadRequest) as info:
        parse_speak_params(query(text))
    assert info.value.message == message


def test_speed_one_is_served():
    assert parse_speak_params(query("speed=1.0&encoding=linear16")).encoding == "linear16"


@pytest.mark.parametrize(("model", "served", "families", "message"), [
    ("nova-3-general", ["tiny.en"], ("nova", "enhanced", "base", "whisper"), None),
    ("tiny.en", ["tiny.en"], ("nova", "enhanced", "base", "whisper"), None),
    ("", ["tiny.en"], ("nova",), None),
    ("aura-2-thalia-en", ["alba"], ("aura",), None),
    ("alba", ["alba"], ("aura",), None),
    ("gpt-4o-transcribe", ["tiny.en"], ("nova", "enhanced", "base", "whisper"),
     "model: 'gpt-4o-transcribe' is not served here; use one of: tiny.en, nova-*, enhanced-*, base-*, whisper-*"),
    ("eleven_v3", ["alba", "marius"], ("aura",), ("model: 'eleven_v3' is not served here; use one of: alba, marius, "
                                                 "aura-*")),
])
def test_a_model_is_the_servers_own_or_of_a_deepgram_family(model, served, families, message):
    from gateway.fronts.deepgram.params import check_model

    if message is None:
        check_model(model, served, families)
        return
    with pytest.raises(BadRequest) as info:
        check_model(model, served, families)
    assert info.value.message == message


@pytest.mark.parametrize(("path", "query", "message"), [
    ("/v1/listen", "encoding=opus", ("encoding: 'opus' is not supported; use linear16, mulaw or alaw (this gateway "
                                     "decodes no containers or compressed audio)")),
    ("/v1/listen", "channels=2", "channels: 2 is not supported; send mono audio (channels=1)"),
    ("/v1/listen", "sample_rate=4000", "sample_rate: '4000' must be between 8000 and 48000"),
    ("/v1/listen", "interim_results=maybe", "interim_results: 'maybe' is not a boolean (use true or false)"),
    ("/v1/listen", "endpointing=soon", "endpointing: 'soon' is not an integer"),
    ("/v1/listen", "language=english!", "language: 'english!' is not a BCP-47 language tag"),
    ("/v1/listen", "model=gpt-4o-transcribe", ("model: 'gpt-4o-transcribe' is not served here; use one of: tiny.en, "
                                               "nova-*, enhanced-*, base-*, whisper-*")),
    ("/v1/speak", "encoding=mp3", ("encoding: 'mp3' is not supported; use linear16, mulaw or alaw (this gateway "
                                   "decodes no containers or compressed audio)")),
    ("/v1/speak", "container=wav", "container: 'wav' is not supported on the socket; use container=none"),
    ("/v1/speak", "sample_rate=99", "sample_rate: '99' must be between 8000 and 48000"),
    ("/v1/speak", "model=eleven_v3", "model: 'eleven_v3' is not served here; use one of: alba, marius, aura-*"),
])
def test_a_bad_query_gets_an_error_message_and_close_4400(tmp_path, path, query, message):
    with APPS[path](tmp_path) as client, client.websocket_connect(f"{path}?{query}") as ws:
        assert receive(ws) == {"type": "Error", "variant": "bad_request", "description": message,
                               "code": "bad_request"}
        assert close_code(ws) == (4400, message)
