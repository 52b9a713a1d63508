"""The wire form of every server -> client message: exact JSON text, key order
included, and the fields that are internal to the gateway never on it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gateway.protocol import common, dictation, tts
from gateway.protocol.common import Closed, ErrorEvent

WORDS = [{"word": "hello", "start": 1.25, "end": 1.5, "probability": 0.9}]

CASES: list[tuple[Any, str]] = [
    (Closed(3, 12.34567), '{"type": "closed", "utterances": 3, "audio_s": 12.346}'),
    (ErrorEvent("bad_request", "why", False),
     '{"type": "error", "code": "bad_request", "message": "why", "retryable": false}'),
    (ErrorEvent("over_capacity", "full", True, {"retry_after_s": 2.5, "limit": 4}, close_code=1013),
     ('{"type": "error", "code": "over_capacity", "message": "full", "retryable": true, '
     '"retry_after_s": 2.5, "limit": 4}')),
    (dictation.Ready(session="s1", sample_rate=16000, encoding="s16le", language="en", model="small.en"),
     ('{"type": "ready", "session": "s1", "protocol": 1, "sample_rate": 16000, "encoding": "s16le", '
     '"language": "en", "model": "small.en"}')),
    (dictation.SpeechStarted(2, 1.25, start_sample=20000), '{"type": "speech_started", "utterance": 2, "at": 1.25}'),
    (dictation.Partial(2, "hello wor", "hello", 1.25, 2.0, 0.125),
     ('{"type": "partial", "utterance": 2, "text": "hello wor", "stable": "hello", "start": 1.25, "end": 2.0, '
     '"lag_s": 0.125}')),
    (dictation.Final(2, "hello world", 1.25, 2.5, "en", lag_s=0.3, end_sample=40000),
     '{"type": "final", "utterance": 2, "text": "hello world", "start": 1.25, "end": 2.5, "language": "en"}'),
    (dictation.Final(2, "hello", 1.25, 2.5, "en", WORDS, lag_s=0.3, end_sample=40000),
     ('{"type": "final", "utterance": 2, "text": "hello", "start": 1.25, "end": 2.5, "language": "en", '
     '"words": [{"word": "hello", "start": 1.25, "end": 1.5, "probability": 0.9}]}')),
    (dictation.EagerFinal(2, "hello world", 1.25, 2.5, "en"),
     '{"type": "eager_final", "utterance": 2, "text": "hello world", "start": 1.25, "end": 2.5, "language": "en"}'),
    (dictation.EagerFinal(2, "hello", 1.25, 2.5, "en", WORDS),
     ('{"type": "eager_final", "utterance": 2, "text": "hello", "start": 1.25, "end": 2.5, "language": "en", '
     '"words": [{"word": "hello", "start": 1.25, "end": 1.5, "probability": 0.9}]}')),
    (dictation.TurnResumed(2, 2.75), '{"type": "turn_resumed", "utterance": 2, "at": 2.75}'),
    (dictation.Finalized("m1", 2), '{"type": "finalized", "id": "m1", "utterance": 2}'),
    (dictation.Finalized("m2", None), '{"type": "finalized", "id": "m2", "utterance": null}'),
    (dictation.Discarded(4, end_sample=64000), '{"type": "discarded", "utterance": 4}'),
    (tts.Ready(engine="pocket", voice="alba", sample_rate=24000, encoding="pcm_s16le", frame_samples=1920,
               session="t1"),
     ('{"type": "ready", "protocol": 1, "session": "t1", "engine": "pocket", "voice": "alba", '
     '"sample_rate": 24000, "encoding": "pcm_s16le", "frame_samples": 1920}')),
    (tts.Ready(engine="piper", voice=None, sample_rate=22050, encoding="pcm_f32le", frame_samples=1764,
               session="t2"),
     ('{"type": "ready", "protocol": 1, "session": "t2", "engine": "piper", "voice": null, '
     '"sample_rate": 22050, "encoding": "pcm_f32le", "frame_samples": 1764}')),
    (tts.Start("u1", "Hello there."), '{"type": "start", "id": "u1", "text": "Hello there."}'),
    (tts.UtteranceEnd("u1", 25, 2.0000004, 123.456, 0.12345),
     '{"type": "end", "id": "u1", "frames": 25, "audio_s": 2.0, "ttfa_ms": 123.5, "rtf": 0.123}'),
    (tts.UtteranceEnd("u2", 0, 0.0, None, None),
     '{"type": "end", "id": "u2", "frames": 0, "audio_s": 0.0, "ttfa_ms": null, "rtf": null}'),
    (tts.Flushed("f1"), '{"type": "flushed", "id": "f1"}'),
    (tts.Cancelled("u3", 7), '{"type": "cancelled", "id": "u3", "frames_sent": 7}'),
    (tts.Cancelled(None, 0), '{"type": "cancelled", "id": null, "frames_sent": 0}'),
]


@pytest.mark.parametrize(("message", "wire"), CASES, ids=lambda c: type(c).__qualname__ if not isinstance(c, str) else "")
def test_wire_form_is_exact(message: Any, wire: str) -> None:
    assert json.dumps(message.to_dict()) == wire


def _server_messages() -> set[type]:
    found: set[type] = set()
    for module in (common, dictation, tts):
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and hasattr(value, "to_dict") \
                    and value.__module__ == module.__name__:
                found.add(value)
    return found


def test_every_server_message_has_a_case() -> None:
    assert _server_messages() == {type(message) for message, _ in CASES}
