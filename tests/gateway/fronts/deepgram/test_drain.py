"""The drain before a stop on the Deepgram fronts, in process with fakes: they
drain as the native sockets do (their sessions are the native ones), in
Deepgram's messages: /v1/listen's open utterance gets its final Results, then
1001; /v1/speak speaks its buffer and queue, answers a late Speak with a
Warning, then 1001."""

from __future__ import annotations

import numpy as np
from starlette.websockets import WebSocketDisconnect

from gateway.audio import Encoding, encode
from tests.gateway.fakes import FakeTtsEngine, expected_audio
from tests.gateway.helpers import dictation_client, drain_marks, draining, start_drain, tts_client, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import next_close, receive

NOT_TAKEN = "'text' was not taken: the server is stopping; reconnect and retry what has no \"end\" event"


def next_or_close(ws):
    """The next message, or the close as (code, reason)."""
    try:
        return receive(ws)
    except WebSocketDisconnect as closed:
        return closed.code, closed.reason


def test_speak_speaks_its_buffer_warns_of_a_late_speak_then_closes_1001(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    with tts_client(tmp_path, engine) as client, client.websocket_connect("/v1/speak") as ws:
        assert receive(ws)["type"] == "Metadata"
        ws.send_json({"type": "Speak", "text": "Hello there. Half a sen"})
        audio = receive(ws)
        drained = start_drain(client)
        wait_for(lambda: draining(client), "ready is 503")
        ws.send_json({"type": "Speak", "text": "After the drain began."})
        warnings = []
        while not isinstance(message := next_or_close(ws), tuple):
            if isinstance(message, bytes):
                audio += message
            else:
                warnings.append(message)
        assert message == (1001, "server stopping; retry on a new connection")
        assert drained.result(timeout=10) is True
    assert warnings == [{"type": "Warning", "description": NOT_TAKEN, "code": "draining", "warn_code": "draining",
                         "warn_msg": NOT_TAKEN}]
    assert audio == encode(np.concatenate([expected_audio("Hello there."), expected_audio("Half a sen")]),
                           Encoding.S16LE)


def test_listen_finishes_the_open_utterance_then_closes_1001(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/listen?vad_events=true") as ws:
        ws.send_bytes(b"\1\0" * 1600)
        wait_for(lambda: fake.streams, "the stream")
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.05, "start_sample": 800})
        assert receive(ws)["type"] == "SpeechStarted"
        drained = start_drain(client)
        wait_for(lambda: draining(client), "ready is 503")
        assert drain_marks(fake) == []  # the utterance is open: it is heard to its end
        fake.play_from_thread(client, {"ev": "final", "utterance": 0, "text": "every word", "start": 0.05, "end": 0.2,
                                       "language": "en"})
        final = receive(ws)
        assert (final["type"], final["is_final"], final["channel"]["alternatives"][0]["transcript"]) == (
            "Results", True, "every word")
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "finalized", "id": mark, "utterance": None})
        assert next_close(ws) == (1001, "server stopping; every final is sent; retry on a new connection")
        assert drained.result(timeout=10) is True
