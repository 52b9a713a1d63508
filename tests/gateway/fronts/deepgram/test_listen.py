"""Deepgram's /v1/listen in process (TestClient) with a fake sidecar: query
mapping, the translation of every session event, Finalize always answered by
exactly one from_finalize Results, CloseStream, G.711 input, the NET-0001 idle
close and vendor-shaped errors."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.codecs import g711
from gateway.fronts.deepgram.messages import model_uuid
from tests.gateway.helpers import dictation_client, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, receive

MODEL = {"name": "tiny.en", "version": "voxgate", "arch": "whisper"}


def sync(ws) -> None:
    """A round trip through the session: every message sent before is handled."""
    ws.send_json({"type": "Sync"})
    assert receive(ws)["variant"] == "SchemaError"


def results(text: str, start: float, end: float, *, is_final: bool, speech_final: bool, from_finalize: bool,
            request_id: str) -> dict:
    return {"type": "Results", "channel_index": [0, 1], "duration": round(end - start, 3), "start": start,
            "is_final": is_final, "speech_final": speech_final,
            "channel": {"alternatives": [{"transcript": text, "confidence": 1.0 if text else 0.0, "words": (
                [{"word": "hello", "start": start, "end": round(start + (end - start) * 5 / 11, 3), "confidence": 1.0,
                  "punctuated_word": "Hello"},
                 {"word": "world", "start": round(start + (end - start) * 5 / 11, 3), "end": end, "confidence": 1.0,
                  "punctuated_word": "world."}] if text == "Hello world." else [])}]},
            "metadata": {"request_id": request_id, "model_info": MODEL, "model_uuid": model_uuid("tiny.en")},
            "from_finalize": from_finalize}


def test_the_query_maps_onto_the_sidecar_options(tmp_path):
    fake = FakeSidecar()
    url = "/v1/listen?model=nova-3&language=en-US&interim_results=true&endpointing=300&punctuate=true&smart_format=false"
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(url) as ws:
        sync(ws)
        ws.send_json({"type": "CloseStream"})
        assert receive(ws)["type"] == "Metadata"
    (open_header, _), *_ = fake.frames
    assert {k: open_header[k] for k in ("language", "interim", "word_timestamps", "silence_ms")} == {
        "language": "en", "interim": True, "word_timestamps": False, "silence_ms": 300}


def test_interim_and_final_results_speech_started_and_utterance_end(tmp_path):
    fake = FakeSidecar()
    url = "/v1/listen?interim_results=true&vad_events=true&utterance_end_ms=1000"
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(url) as ws:
        ws.send_bytes(b"\0\0" * 1600)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 0},
                              {"ev": "partial", "utterance": 0, "text": "Hello", "stable": "", "start": 0.5, "end": 1.0},
                              {"ev": "partial", "utterance": 0, "text": "Hello world", "stable": "Hello", "start": 0.5, "end": 1.6},
                              {"ev": "final", "utterance": 0, "text": "Hello world.", "start": 0.5, "end": 1.6, "language": "en",
                               "endpoint": True})
        assert receive(ws) == {"type": "SpeechStarted", "channel": [0], "timestamp": 0.5}
        first = receive(ws)
        rid = first["metadata"]["request_id"]
        assert (first["is_final"], first["channel"]["alternatives"][0]["transcript"]) == (False, "Hello")
        assert receive(ws)["channel"]["alternatives"][0]["transcript"] == "Hello world"  # cumulative
        assert receive(ws) == results("Hello world.", 0.5, 1.6, is_final=True, speech_final=True,
                                      from_finalize=False, request_id=rid)
        assert receive(ws) == {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": 1.6}


def test_finalize_with_nothing_open_gets_one_empty_from_finalize_result(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/listen") as ws:
        ws.send_bytes(b"\0\0" * 16000)
        ws.send_json({"type": "Finalize"})
        sync(ws)
        assert next(h for h, _ in fake.frames if h["op"] == "finalize")["id"] == "f1"
        fake.play_from_thread(client, {"ev": "finalized", "id": "f1", "utterance": None})
        got = receive(ws)
        assert got == results("", 0.0, 1.0, is_final=True, speech_final=False, from_finalize=True,
                              request_id=got["metadata"]["request_id"])


def test_a_final_of_an_older_utterance_does_not_answer_a_finalize(tmp_path):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/listen") as ws:
        ws.send_bytes(b"\0\0" * 16000)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0},
                              {"ev": "speech_started", "utterance": 1, "at": 0.8, "start_sample": 0})
        ws.send_json({"type": "Finalize"})
        sync(ws)
        fake.play_from_thread(client,
                              {"ev": "final", "utterance": 0, "text": "one", "start": 0.1, "end": 0.5, "language": "en",
                               "endpoint": True},
                              {"ev": "final", "utterance": 1, "text": "two", "start": 0.8, "end": 1.0, "language": "en"},
                              {"ev": "finalized", "id": "f1", "utterance": 1})
        ws.send_json({"type": "CloseStream"})
        got = [receive(ws) for _ in range(3)]
        assert [(m["type"], m.get("from_finalize"), m.get("speech_final")) for m in got] == [
            ("Results", False, True), ("Results", True, False), ("Metadata", None, None)]


@pytest.mark.parametrize(("closed_by_pause", "answers"), [
    # the Finalize closed the utterance: its final is the answer, and nothing else is sent
    (False, [("Results", True, False, "one"), ("Metadata", None, None, None)]),
    # the speaker's pause had closed it and its final was still being decoded when the Finalize came:
    # the final is the endpoint, and the Finalize gets its own empty answer
    (True, [("Results", False, True, "one"), ("Results", True, False, ""), ("Metadata", None, None, None)]),
], ids=["closed-by-finalize", "closed-by-the-pause-before-it"])
def test_finalize_is_answered_once_by_the_final_it_closed_or_by_an_empty_result(tmp_path, closed_by_pause, answers):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/listen") as ws:
        ws.send_bytes(b"\0\0" * 16000)
        sync(ws)
        fake.play_from_thread(client, {"ev": "speech_started", "utterance": 0, "at": 0.1, "start_sample": 0})
        ws.send_json({"type": "Finalize"})
        sync(ws)
        fake.play_from_thread(client,
                              {"ev": "final", "utterance": 0, "text": "one", "start": 0.1, "end": 0.5, "language": "en",
                               "endpoint": closed_by_pause},
                              {"ev": "finalized", "id": "f1", "utterance": None if closed_by_pause else 0})
        ws.send_json({"type": "CloseStream"})
        got = [receive(ws) for _ in answers]
        assert [(m["type"], m.get("from_finalize"), m.get("speech_final"),
                 m.get("channel", {}).get("alternatives", [{}])[0].get("transcript")) for m in got] == answers
        assert close_code(ws) == (1000, "")


@pytest.mark.parametrize("closing", [{"type": "CloseStream"}, b""])
def test_close_stream_and_an_empty_frame_end_with_metadata_then_1000(tmp_path, closing):
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/listen?sample_rate=8000") as ws:
        audio = b"\x01\x00" * 8000
        ws.send_bytes(audio)
        ws.send_bytes(closing) if isinstance(closing, bytes) else ws.send_json(closing)
        metadata = receive(ws)
        assert close_code(ws) == (1000, "")
    import hashlib
    uuid = model_uuid("tiny.en")
    assert metadata == {"type": "Metadata", "transaction_key": "deprecated", "request_id": metadata["request_id"],
                        "sha256": hashlib.sha256(audio).hexdigest(), "created": metadata["created"],
                        "duration": 1.0, "channels": 1, "models": [uuid], "model_info": {uuid: MODEL}}
    assert fake.ops(stream_of_any(fake))[-1] == "end"


def stream_of_any(fake: FakeSidecar) -> str:
    return next(h["stream"] for h, _ in fake.frames if h["op"] == "open")


@pytest.mark.parametrize("law", ["mulaw", "alaw"])
def test_g711_audio_reaches_the_sidecar_as_the_pcm_it_encodes(tmp_path, law):
    fake = FakeSidecar()
    tone = (np.sin(np.arange(1600) / 5) * 8000).astype("<i2")
    encode_law, decode_law = ((g711.mulaw_encode, g711.mulaw_decode) if law == "mulaw"
                              else (g711.alaw_encode, g711.alaw_decode))
    coded = encode_law(tone.astype(np.float32) / 32768)
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect(f"/v1/listen?encoding={law}&sample_rate=16000") as ws:
        ws.send_bytes(coded)
        ws.send_json({"type": "CloseStream"})
        receive(ws)
    sent = fake.audio_sent(stream_of_any(fake))
    expected = decode_law(coded)
    assert len(sent) == 1600 and np.max(np.abs(sent - expected)) < 1e-4


def test_no_audio_and_no_keepalive_for_10_s_closes_1011_net_0001(tmp_path, monkeypatch):
    from gateway.fronts.deepgram import listen

    monkeypatch.setattr(listen, "IDLE_TIMEOUT_S", 0.3)
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/listen") as ws:
        assert close_code(ws) == (1011, listen.NET_0001)


def test_a_bad_control_message_is_an_error_and_the_stream_goes_on(tmp_path):
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/listen") as ws:
        ws.send_text("not json")
        assert receive(ws) == {"type": "Error", "variant": "SchemaError", "description": "message is not valid JSON",
                               "code": "bad_message"}
        ws.send_json({"type": "Speak"})
        assert receive(ws)["description"] == ("unknown message type 'Speak'; expected one of: "
                                              "KeepAlive, Finalize, CloseStream")
        ws.send_json({"type": "Finalize", "channel": 1})
        assert receive(ws)["description"] == ("Finalize.channel: not a field of Finalize; its fields are: (none "
                                              "besides type)")
        ws.send_json({"type": "CloseStream"})
        assert receive(ws)["type"] == "Metadata"


def test_without_asr_the_stream_is_refused_with_an_error_message(tmp_path):
    from tests.gateway.helpers import make_client

    with make_client(tmp_path) as client, client.websocket_connect("/v1/listen") as ws:
        error = receive(ws)
        assert (error["type"], error["variant"]) == ("Error", "engine_unavailable")
        assert close_code(ws)[0] == 1011


def test_the_token_subprotocol_is_echoed(tmp_path):
    with dictation_client(tmp_path) as client, \
            client.websocket_connect("/v1/listen", subprotocols=["token", "some-key"]) as ws:
        assert ws.accepted_subprotocol == "token"
        ws.send_json({"type": "CloseStream"})
        assert receive(ws)["type"] == "Metadata"


@pytest.mark.parametrize(("gateway_idle_s", "listen_idle_s"), [(30.0, 10.0), (4.0, 4.0)])
def test_deepgrams_idle_close_is_held_to_the_gateways_idle_timeout(tmp_path, gateway_idle_s, listen_idle_s):
    with dictation_client(tmp_path, idle_timeout_s=gateway_idle_s) as client, \
            client.websocket_connect("/v1/listen"):
        registry = client.app_state["sessions"]
        wait_for(lambda: len(registry) == 1, "the stream is registered")
        (entry,) = client.get("/v1/admin/sessions").json()["sessions"]
        assert entry["idle_timeout_s"] == listen_idle_s  # the session's own idle rule
