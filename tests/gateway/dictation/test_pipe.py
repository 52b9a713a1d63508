"""The pipe codec: a sidecar frame header becomes one typed event, or a
``PipeError`` that names what is wrong."""

from __future__ import annotations

import pytest

from gateway.dictation.pipe import ForStream, Hello, Lag, PipeError, RequestFailed, Transcription, read_event
from gateway.protocol.common import ErrorEvent
from gateway.protocol.dictation import Final, Finalized, SpeechStarted


def test_transcript_events_become_protocol_events_with_their_sample_positions():
    started = read_event({"ev": "speech_started", "stream": "s1", "utterance": 0, "at": 0.5, "start_sample": 6400})
    assert started == ForStream("s1", SpeechStarted(0, 0.5))
    assert isinstance(started.event, SpeechStarted) and started.event.start_sample == 6400
    final = read_event({"ev": "final", "stream": "s1", "utterance": 0, "text": "Hi.", "start": 0.5, "end": 0.9,
                        "language": "en", "lag_s": 0.25, "end_sample": 16000})
    assert isinstance(final, ForStream) and isinstance(final.event, Final)
    assert (final.event.lag_s, final.event.end_sample) == (0.25, 16000)
    assert final.event.to_dict() == {"type": "final", "utterance": 0, "text": "Hi.", "start": 0.5, "end": 0.9,
                                     "language": "en"}  # the positions are not sent
    assert read_event({"ev": "finalized", "stream": "s1", "id": "f1", "utterance": None}) == ForStream(
        "s1", Finalized("f1", None))


def test_errors_carry_a_code_of_the_gateway_table():
    error = read_event({"ev": "error", "stream": "s1", "code": "unsupported_language", "message": "no xx"})
    assert error == ForStream("s1", ErrorEvent("unsupported_language", "no xx", False))
    unknown = read_event({"ev": "error", "stream": "s1", "code": "kaput", "message": "what"})
    assert unknown == ForStream("s1", ErrorEvent("asr_failed", "what", False))
    assert read_event({"ev": "error", "req": "r2", "code": "asr_failed", "message": "decode failed"}) == \
        RequestFailed("r2", ErrorEvent("asr_failed", "decode failed", False))


def test_the_supervisors_own_events():
    assert read_event({"ev": "ready", "model": "tiny.en", "multilingual": False, "languages": ["en"]}) == \
        Hello("tiny.en", False, ["en"])
    assert read_event({"ev": "lag", "streams": {"s1": 0.5}, "busy_s": 2}) == Lag({"s1": 0.5}, 2.0)
    assert read_event({"ev": "lag", "streams": {}, "busy_s": True}) == Lag({}, None)
    answer = read_event({"ev": "transcription", "req": "r1", "text": "Hi.", "language": "en"})
    assert answer == Transcription("r1", {"text": "Hi.", "language": "en"})


@pytest.mark.parametrize(("header", "says"), [
    ({"ev": "shout", "stream": "s1"}, "unknown event 'shout'"),
    ({"ev": "partial", "stream": "s1", "utterance": 0}, "'partial' event: KeyError('text')"),
    ({"ev": "speech_started", "stream": "s1", "utterance": "one", "at": 0.0}, "'speech_started' event: ValueError"),
    ({"ev": "final", "req": "r1"}, "event 'final' does not answer a request"),
])
def test_a_header_that_is_no_event_is_a_pipe_error_naming_why(header, says):
    with pytest.raises(PipeError) as caught:
        read_event(header)
    assert says in str(caught.value)
