"""Talking to the OpenAI Realtime socket in the front's in-process tests."""

from __future__ import annotations

import base64

from tests.support.sockets import receive

URL = "/v1/realtime?intent=transcription&model=gpt-4o-transcribe"


def append(ws, pcm: bytes, event_id: str | None = None) -> None:
    event = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
    if event_id is not None:
        event["event_id"] = event_id
    ws.send_json(event)


def sync(ws) -> None:
    """A round trip through the transport and the session: every event sent before is handled."""
    ws.send_json({"type": "sync"})
    event = receive(ws)
    assert (event["type"], event["error"]["code"]) == ("error", "bad_message"), event


def opened(ws) -> str:
    """Read session.created; the socket's id prefix (event and item ids start with it)."""
    created = receive(ws)
    assert created["type"] == "session.created"
    return created["session"]["id"].removeprefix("sess_")


def configure(ws, audio_input: dict) -> dict:
    ws.send_json({"type": "session.update", "event_id": "evt_client_1",
                  "session": {"type": "transcription", "audio": {"input": audio_input}}})
    return receive(ws)


def manual_turn_started(ws, client, fake, pcm: bytes) -> str:
    """With turn detection off (push to talk), send ``pcm`` and have the fake
    recognizer hear speech start in it; the socket's id prefix."""
    prefix = opened(ws)
    configure(ws, {"turn_detection": None})
    append(ws, pcm)
    sync(ws)
    fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0})
    return prefix
