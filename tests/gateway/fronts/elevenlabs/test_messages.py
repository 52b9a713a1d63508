"""ElevenLabs' parameters, client messages and approximate alignment, as
units: exact parses, exact refusals, exact alignment chunks."""

from __future__ import annotations

import pytest

from auth.credentials import Credential, CredentialKind
from engines.timing import SpokenMark
from gateway.codecs.formats import OutputFormat
from gateway.errors import BadMessage, BadRequest
from gateway.fronts.elevenlabs.alignment import CharClock, SpeechRate
from gateway.fronts.elevenlabs.messages import (
    ClientMessage,
    audio_message,
    credential_of,
    error_message,
    final_message,
    parse_client_message,
)
from gateway.fronts.elevenlabs.params import AudioFormat, parse_output_format, parse_socket_params
from gateway.protocol.tts import TextLimits

LIMITS = TextLimits()

# ---- parameters


@pytest.mark.parametrize(("name", "fmt", "rate"), [
    ("pcm_16000", OutputFormat.PCM_S16LE, 16000), ("pcm_44100", OutputFormat.PCM_S16LE, 44100),
    ("ulaw_8000", OutputFormat.MULAW, 8000), ("alaw_8000", OutputFormat.ALAW, 8000),
    ("mp3_44100_128", OutputFormat.MP3, 44100), ("mp3_22050_32", OutputFormat.MP3, 22050),
    (None, OutputFormat.MP3, 44100),  # ElevenLabs' default
])
def test_output_formats(name, fmt, rate):
    assert parse_output_format(name) == AudioFormat(name or "mp3_44100_128", fmt, rate)


@pytest.mark.parametrize("name", ["pcm_12345", "opus_48000_64", "mp3_1000_32", "wav"])
def test_other_output_formats_are_refused_naming_the_offered_ones(name):
    with pytest.raises(BadRequest) as info:
        parse_output_format(name)
    assert info.value.message == (f"output_format: {name!r} is not supported; use one of: pcm_8000, pcm_16000, "
                                  "pcm_22050, pcm_24000, pcm_32000, pcm_44100, pcm_48000, ulaw_8000, alaw_8000, "
                                  "mp3_22050_32, mp3_44100_<kbps>")


def test_message_durations_by_format():
    assert AudioFormat("pcm_16000", OutputFormat.PCM_S16LE, 16000).duration_ms(b"\0" * 3200) == 100.0
    assert AudioFormat("ulaw_8000", OutputFormat.MULAW, 8000).duration_ms(b"\0" * 800) == 100.0
    assert AudioFormat("mp3_44100_128", OutputFormat.MP3, 44100).duration_ms(b"\0" * 800) == 100.0  # 64 kbit/s


def test_socket_query_defaults_and_values():
    params = parse_socket_params({})
    assert (params.audio.name, params.inactivity_timeout_s, params.language_code) == ("mp3_44100_128", 20, None)
    # what LiveKit's ElevenLabs plugin (1.8.9) sends by default, with a language
    params = parse_socket_params({"model_id": "eleven_flash_v2_5", "output_format": "pcm_24000",
                                  "inactivity_timeout": "180", "sync_alignment": "true", "auto_mode": "true",
                                  "enable_logging": "true", "enable_ssml_parsing": "false",
                                  "apply_text_normalization": "auto", "language_code": "en"})
    assert (params.model_id, params.audio.name, params.inactivity_timeout_s, params.language_code) == (
        "eleven_flash_v2_5", "pcm_24000", 180, "en")


@pytest.mark.parametrize(("query", "message"), [
    ({"inactivity_timeout": "181"}, "inactivity_timeout: 181 must be between 1 and 180 seconds"),
    ({"inactivity_timeout": "soon"}, "inactivity_timeout: 'soon' is not an integer"),
    ({"sync_alignment": "yes please"}, "sync_alignment: 'yes please' is not a boolean (use true or false)"),
    ({"apply_text_normalization": "off"},
     "apply_text_normalization: 'off' is not supported; each engine prepares text its own way (auto)"),
    ({"enable_ssml_parsing": "true"},
     "enable_ssml_parsing: not supported; SSML is not parsed here (its tags would be spoken)"),
    ({"apply_language_text_normalization": "true"},
     "apply_language_text_normalization: not supported; each engine prepares text its own way"),
    ({"seed": "3"}, ("seed: not a parameter here; known: model_id, language_code, output_format, inactivity_timeout, "
                    "sync_alignment, auto_mode, enable_logging, enable_ssml_parsing, apply_text_normalization, "
                    "apply_language_text_normalization, optimize_streaming_latency")),
])
def test_bad_socket_query_values_are_named(query, message):
    with pytest.raises(BadRequest) as info:
        parse_socket_params(query)
    assert info.value.message == message


# ---- client messages


def test_the_messages_of_both_sockets():
    assert parse_client_message('{"text": " ", "voice_settings": {"speed": 1.0}, '
                                '"generation_config": {"chunk_length_schedule": [50]}, "xi_api_key": "k"}', LIMITS) \
        == ClientMessage(text=" ", credential=Credential(CredentialKind.API_KEY, "k"))
    assert parse_client_message('{"text": "Hi. ", "flush": true, "try_trigger_generation": true}', LIMITS) == \
        ClientMessage(text="Hi. ", flush=True)
    assert parse_client_message('{"text": ""}', LIMITS) == ClientMessage(text="")
    assert parse_client_message('{"context_id": "c1", "flush": true}', LIMITS) == \
        ClientMessage(text=None, context_id="c1", flush=True)
    assert parse_client_message('{"context_id": "c1", "close_context": true}', LIMITS) == \
        ClientMessage(text=None, context_id="c1", close_context=True)
    assert parse_client_message('{"close_socket": true}', LIMITS) == ClientMessage(text=None, close_socket=True)


@pytest.mark.parametrize(("raw", "credential"), [
    ('{"text": " ", "xi-api-key": "k1"}', Credential(CredentialKind.API_KEY, "k1")),
    ('{"text": " ", "authorization": "Bearer t1"}', Credential(CredentialKind.BEARER, "t1")),
    ('{"text": " ", "authorization": "t2"}', Credential(CredentialKind.BEARER, "t2")),
    ('{"text": " ", "xi_api_key": ""}', None),
    ('not json', None),
])
def test_the_credential_a_message_carries(raw, credential):
    assert credential_of(raw) == credential


@pytest.mark.parametrize(("raw", "message"), [
    ('{"text": 5}', "text must be a string"),
    ('{"text": "x", "flush": "yes"}', "flush must be true or false"),
    ('{"text": "x", "context_id": ""}', "context_id must be a string of 1..128 characters"),
    ('{"text": "x", "voice_settings": 3}', "voice_settings must be an object"),
    ('{"context_id": "c"}', 'a message needs "text", or "flush", "close_context" or "close_socket" set to true'),
    ('[]', 'message must be a JSON object with a "type"'),
    ('{"text": "' + "a" * 2001 + '"}', "text has 2001 characters; the limit is 2000 (split it into several messages)"),
])
def test_bad_messages_are_named(raw, message):
    with pytest.raises(BadMessage) as info:
        parse_client_message(raw, LIMITS)
    assert info.value.message == message


def test_server_messages_are_camel_case():
    alignment = {"chars": ["H"], "charStartTimesMs": [0], "charDurationsMs": [80]}
    assert audio_message("AAA=", alignment, "c1") == {"audio": "AAA=", "isFinal": False,
                                                      "normalizedAlignment": alignment, "alignment": alignment,
                                                      "contextId": "c1"}
    assert audio_message("AAA=", None, None) == {"audio": "AAA=", "isFinal": False, "normalizedAlignment": None,
                                                 "alignment": None}
    assert final_message("c1") == {"isFinal": True, "contextId": "c1"}
    assert final_message(None) == {"isFinal": True}
    assert error_message("bad_message", "why", 400, "c1") == {"message": "why", "error": "bad_message", "code": 400,
                                                              "contextId": "c1"}


# ---- alignment


def test_characters_are_spread_over_the_messages_relative_to_each():
    clock = CharClock("Hello", SpeechRate(), leading_space=False)  # 65 ms a character at first
    first, second = clock.take(80), clock.take(80)
    assert first == {"chars": ["H", "e"], "charStartTimesMs": [0, 65], "charDurationsMs": [65, 15]}
    # characters start at 130 and 195 ms: 50 and 115 ms into the second message (80..160 ms)
    assert second == {"chars": ["l"], "charStartTimesMs": [50], "charDurationsMs": [30]}
    assert clock.take(80) == {"chars": ["l"], "charStartTimesMs": [35], "charDurationsMs": [45]}
    assert clock.take(80) == {"chars": ["o"], "charStartTimesMs": [20], "charDurationsMs": [60]}
    assert clock.take(80) is None  # the audio outlasts the text


def test_what_the_audio_ran_out_before_comes_last_and_the_rate_learns():
    rate = SpeechRate()
    clock = CharClock("Hello", rate, leading_space=False)
    assert clock.take(100)["chars"] == ["H", "e"]
    assert clock.rest() == {"chars": ["l", "l", "o"], "charStartTimesMs": [0, 0, 0], "charDurationsMs": [0, 0, 0]}
    assert rate.ms_per_char == 20.0  # 100 ms for 5 characters
    later = CharClock("Hi", rate, leading_space=True)
    assert later.take(100) == {"chars": [" ", "H", "i"], "charStartTimesMs": [0, 20, 40],
                               "charDurationsMs": [20, 20, 60]}
    assert later.rest() is None
    assert rate.ms_per_char == (20.0 + 100 / 3) / 2


class MarkedStream:
    """An engine stream that marks the end of every word (engines/timing.py)."""

    word_exact = True

    def __init__(self, marks: list[SpokenMark]) -> None:
        self.marks = marks


def test_the_engines_word_marks_time_the_characters_and_the_rest_goes_at_the_steady_rate():
    clock = CharClock("Hi there you", SpeechRate(), leading_space=False)
    # "Hi" ends at 200 ms, " there" at 1000 ms (24 kHz samples); "you" is not synthesized yet
    clock.follow(MarkedStream([SpokenMark(2, 4800), SpokenMark(8, 24000)]), 24000)
    assert clock.take(250) == {"chars": ["H", "i", " "], "charStartTimesMs": [0, 100, 200],
                               "charDurationsMs": [100, 100, 50]}
    # " there" shares 800 ms: a character every 133 ms from 200 ms
    assert clock.take(250) == {"chars": ["t", "h"], "charStartTimesMs": [83, 217], "charDurationsMs": [133, 33]}
    assert clock.take(500)["chars"] == ["e", "r", "e"]
    # past the last mark, 65 ms a character from its end: " " at 1000, "y" at 1065 ms
    assert clock.take(100) == {"chars": [" ", "y"], "charStartTimesMs": [0, 65], "charDurationsMs": [65, 35]}


def test_a_later_utterances_leading_space_starts_at_its_first_sample_before_the_marked_words():
    clock = CharClock("Hi", SpeechRate(), leading_space=True)
    clock.follow(MarkedStream([SpokenMark(2, 2400)]), 24000)  # "Hi" ends at 100 ms
    assert clock.take(100) == {"chars": [" ", "H", "i"], "charStartTimesMs": [0, 0, 50],
                               "charDurationsMs": [0, 50, 50]}
