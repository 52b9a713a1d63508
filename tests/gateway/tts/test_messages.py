"""Parsing of /v1/tts client messages and query parameters, and the session state machine."""

from __future__ import annotations

import json

import pytest

from gateway.audio import Encoding
from gateway.errors import BadMessage, BadRequest
from gateway.protocol.common import End, Keepalive
from gateway.protocol.tts import Cancel, Flush, Speak, TextFragment, TextLimits, parse_client_message, parse_tts_params
from gateway.tts.states import TRANSITIONS, TtsState, transition

LIMITS = TextLimits(max_chars=50)


def parse(obj) -> object:
    return parse_client_message(obj if isinstance(obj, str) else json.dumps(obj), LIMITS)


def test_every_message_type_parses():
    assert parse({"type": "speak", "text": "Hi.", "id": "a1", "voice": "alba", "seed": 7}) == \
        Speak(text="Hi.", id="a1", voice="alba", seed=7)
    assert parse({"type": "text", "text": ""}) == TextFragment(text="")
    assert parse({"type": "flush"}) == Flush()
    assert parse({"type": "cancel"}) == Cancel()
    assert parse({"type": "end"}) == End()
    assert parse({"type": "keepalive"}) == Keepalive()


def test_fields_the_protocol_does_not_define_are_ignored():
    """PROTOCOL.md: unknown fields are ignored, so a newer client's message still parses."""
    assert parse({"type": "speak", "text": "Hi.", "speed": 1.2, "style": {"x": 1}}) == Speak(text="Hi.")
    assert parse({"type": "text", "text": "Hi.", "flush": True}) == TextFragment(text="Hi.")
    assert parse({"type": "flush", "voice": "alba"}) == Flush()
    assert parse({"type": "cancel", "id": "u1"}) == Cancel()


@pytest.mark.parametrize(("raw", "code", "message"), [
    ("not json", "bad_message", "message is not valid JSON"),
    ("[1, 2]", "bad_message", 'message must be a JSON object with a "type"'),
    ({"text": "hi"}, "bad_message", 'message has no "type" string'),
    ({"type": 3}, "bad_message", 'message has no "type" string'),
    ({"type": "shout"}, "bad_message",
     "unknown message type 'shout'; expected one of: speak, text, flush, cancel, end, keepalive, ack"),
    ({"type": "speak"}, "bad_message", "speak.text must be a string"),
    ({"type": "speak", "text": 5}, "bad_message", "speak.text must be a string"),
    ({"type": "speak", "text": "   "}, "bad_message", "speak.text is empty"),
    ({"type": "speak", "text": "x" * 51}, "text_too_long",
     "speak.text has 51 characters; the limit is 50 (split it into several messages)"),
    ({"type": "speak", "text": "hi", "id": 5}, "bad_message", "speak.id must be a non-empty string"),
    ({"type": "speak", "text": "hi", "id": "i" * 129}, "bad_message", "speak.id is longer than 128 characters"),
    ({"type": "speak", "text": "hi", "voice": ""}, "bad_message", "speak.voice must be a non-empty string"),
    ({"type": "speak", "text": "hi", "seed": -1}, "bad_message",
     "speak.seed: must be an integer between 0 and 4294967295"),
    ({"type": "speak", "text": "hi", "seed": True}, "bad_message",
     "speak.seed: must be an integer between 0 and 4294967295"),
    ({"type": "speak", "text": "hi", "seed": 1.5}, "bad_message",
     "speak.seed: must be an integer between 0 and 4294967295"),
    ({"type": "text"}, "bad_message", "text.text must be a string"),
    ({"type": "text", "text": ["a"]}, "bad_message", "text.text must be a string"),
    ({"type": "text", "text": "y" * 60}, "text_too_long",
     "text.text has 60 characters; the limit is 50 (split it into several messages)"),
])
def test_bad_messages_name_the_field(raw, code, message):
    with pytest.raises(BadMessage) as info:
        parse(raw)
    assert info.value.code == code
    assert info.value.message == message
    assert info.value.to_event() == {"type": "error", "code": code, "message": message, "retryable": False}


def test_query_defaults():
    assert parse_tts_params({}, "pocket") == parse_tts_params({"engine": "", "voice": ""}, "pocket")
    params = parse_tts_params({}, "pocket")
    assert (params.engine, params.voice, params.sample_rate, params.encoding) == ("pocket", None, None, Encoding.S16LE)
    params = parse_tts_params({"engine": "omnivoice", "voice": "v", "sample_rate": "16000",
                               "encoding": "pcm_f32le"}, "pocket")
    assert (params.engine, params.voice, params.sample_rate, params.encoding) == \
        ("omnivoice", "v", 16000, Encoding.F32LE)


@pytest.mark.parametrize(("query", "message"), [
    ({"sample_rate": "abc"}, "sample_rate: 'abc' is not an integer"),
    ({"sample_rate": "7999"}, "sample_rate: '7999' must be between 8000 and 48000"),
    ({"sample_rate": "48001"}, "sample_rate: '48001' must be between 8000 and 48000"),
    ({"encoding": "mp3"}, "encoding: 'mp3' must be one of: pcm_s16le, pcm_f32le, opus, mulaw, alaw"),
    ({"encoding": "opus", "sample_rate": "44100"},
     "sample_rate: '44100' must be one of 8000, 12000, 16000, 24000, 48000 for opus"),
    ({"voice": "v" * 129}, "voice: longer than 128 characters"),
])
def test_bad_query_parameters_name_the_parameter(query, message):
    with pytest.raises(BadRequest) as info:
        parse_tts_params(query, "pocket")
    assert info.value.message == message
    assert info.value.close_code == 4400


MESSAGE_TYPES = ("speak", "text", "flush", "cancel", "end", "keepalive")


def test_open_accepts_everything_and_end_leads_to_ending():
    for kind in MESSAGE_TYPES:
        expected = TtsState.ENDING if kind == "end" else TtsState.OPEN
        assert transition(TtsState.OPEN, kind) is expected
    assert transition(TtsState.ENDING, "keepalive") is TtsState.ENDING


ILLEGAL = [(state, kind) for state in TtsState for kind in MESSAGE_TYPES if kind not in TRANSITIONS[state]]


@pytest.mark.parametrize(("state", "kind"), ILLEGAL)
def test_illegal_transitions_raise(state, kind):
    with pytest.raises(BadMessage) as info:
        transition(state, kind)
    if state is TtsState.DRAINING:  # new work is refused: the client retries it on a new connection
        assert info.value.code == "draining"
        assert info.value.message == (f"{kind!r} was not taken: the server is stopping; reconnect and retry what "
                                      "has no \"end\" event")
        return
    assert info.value.code == "bad_message"
    if state is TtsState.ENDING:
        assert info.value.message == (f"{kind!r} after \"end\": the session is finishing and accepts no more work")
    else:
        assert info.value.message == f"{kind!r} is not accepted while the session is closing"


def test_illegal_table_covers_ending_draining_and_closing():
    assert {(s.value, k) for s, k in ILLEGAL} == (
        {("ending", k) for k in MESSAGE_TYPES if k != "keepalive"} | {("closing", k) for k in MESSAGE_TYPES}
        | {("draining", "speak"), ("draining", "text")})
