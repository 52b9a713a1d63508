"""Both sockets, the vendor fronts' sockets and the JSON routes of the real app, fed
anything: every message gets a clear answer (an error with a code of the table, or
the normal reply), the socket is never closed 1011, an HTTP body never gets a 500,
and a second session open all along is served as before."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from gateway.errors import CODES
from tests.fuzz.strategies import JSON_VALUES, messages, queries
from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.helpers import LOOPBACK, make_app
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import receive

# ``end`` finishes a session on purpose; everything else must leave it open.
TTS_TYPES = ["speak", "text", "flush", "cancel", "keepalive"]
DICTATION_TYPES = ["finalize", "keepalive"]


def not_end(raw: str) -> bool:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return True
    return not (isinstance(data, dict) and data.get("type") == "end")


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:
    # A long idle timeout: a fuzz run sends messages but no audio for longer than the default.
    app = make_app(tmp_path, tts={"pocket": FakeTtsEngine()}, asr=FakeSidecar(), engines=("asr",),
                   idle_timeout_s=600)
    with TestClient(app, client=LOOPBACK) as c:
        yield c


class Session:
    """One socket shared by every example of a test. Once it is closed (the test then
    fails, and Hypothesis goes on to shrink), later examples fail at once instead
    of waiting for messages that can no longer come."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.closed: WebSocketDisconnect | None = None

    def send(self, message: str | bytes) -> None:
        assert self.closed is None, f"the socket was closed by an earlier message: {self.closed!r}"
        self.ws.send_bytes(message) if isinstance(message, bytes) else self.ws.send_text(message)

    def read_until(self, done: Any, *, native: bool = True) -> list[Any]:
        try:
            return read_until(self.ws, done, native=native)
        except WebSocketDisconnect as exc:
            self.closed = exc
            raise


def read_until(ws: Any, done: Any, *, native: bool = True) -> list[Any]:
    """Messages up to and including the first for which ``done`` is true; every error
    of the native protocol (``native``; a front checks its own) is a clear one."""
    seen = []
    while True:
        message = receive(ws)  # a close raises WebSocketDisconnect: the test fails with its code
        seen.append(message)
        if native and isinstance(message, dict) and message.get("type") == "error":
            assert message["code"] in CODES and message["message"] and isinstance(message["retryable"], bool)
        if done(message):
            return seen


def test_the_tts_socket_answers_anything_and_the_other_session_goes_on(client: TestClient) -> None:
    with client.websocket_connect("/v1/tts") as ws, client.websocket_connect("/v1/tts") as other:
        receive(ws), receive(other)
        session = Session(ws)
        probe = iter(range(10**9))

        @given(messages(TTS_TYPES).filter(not_end) | st.binary(max_size=64))
        def check(message: str | bytes) -> None:
            session.send(message)
            mark = f"probe-{next(probe)}"
            session.send(json.dumps({"type": "flush", "id": mark}))
            session.read_until(lambda m: isinstance(m, dict) and m == {"type": "flushed", "id": mark})

        check()
        other.send_json({"type": "speak", "text": "Still here.", "id": "after"})
        replies = read_until(other, lambda m: isinstance(m, dict) and m.get("type") == "end")
        assert replies[0] == {"type": "start", "id": "after", "text": "Still here."}


def test_the_dictation_socket_answers_anything_and_the_other_session_goes_on(client: TestClient) -> None:
    with client.websocket_connect("/v1/dictation") as ws, client.websocket_connect("/v1/dictation") as other:
        receive(ws), receive(other)
        unknown = {"type": "error", "code": "bad_message", "retryable": False,
                   "message": "unknown message type 'probe'; expected one of: finalize, config, end, keepalive"}

        session = Session(ws)

        @given(messages(DICTATION_TYPES).filter(not_end) | st.binary(max_size=2048))
        def check(message: str | bytes) -> None:
            session.send(message)
            session.send(json.dumps({"type": "probe"}))
            session.read_until(lambda m: m == unknown)

        check()
        other.send_json({"type": "end"})
        assert read_until(other, lambda m: isinstance(m, dict) and m.get("type") == "closed")[-1]["type"] == "closed"


@pytest.mark.parametrize(("path", "names"), [
    ("/v1/tts", ["engine", "voice", "sample_rate", "encoding"]),
    ("/v1/dictation", ["sample_rate", "encoding", "language", "interim", "word_timestamps", "silence_ms"]),
])
def test_query_parameters_get_ready_or_4400(client: TestClient, path: str, names: list[str]) -> None:
    @given(queries(names))
    def check(query: dict[str, str]) -> None:
        with client.websocket_connect(f"{path}?{urlencode(query)}") as ws:
            message = ws.receive()
            if message["type"] == "websocket.close":
                raise AssertionError(f"closed without an answer: {message}")
            first = json.loads(message["text"])
            if first["type"] == "error":
                assert first["code"] in CODES and first["code"] != "internal_error"
                closing = ws.receive()
                assert closing["type"] == "websocket.close" and closing["code"] in (4400, 1013, 1011)
                assert closing["code"] != 1011 or first["code"] in ("engine_unavailable",)
            else:
                assert first["type"] == "ready"

    check()


@pytest.mark.parametrize("path", ["/v1/tts", "/v1/audio/speech", "/v1/auth/ticket", "/v1/auth/session"])
def test_json_bodies_never_get_a_500(client: TestClient, path: str) -> None:
    bodies = JSON_VALUES.map(lambda v: json.dumps(v).encode()) | messages(["x"]).map(str.encode) | \
        st.binary(max_size=200)

    @given(bodies)
    def check(body: bytes) -> None:
        r = client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code < 500, (r.status_code, r.text)
        if r.status_code >= 400:
            assert r.json()["code"] in CODES and r.json()["detail"]
            assert CODES[r.json()["code"]].http_status == r.status_code

    check()


def test_the_deepgram_speak_socket_answers_anything_and_the_other_session_goes_on(client: TestClient) -> None:
    with client.websocket_connect("/v1/speak") as ws, client.websocket_connect("/v1/speak") as other:
        receive(ws), receive(other)  # Metadata
        session = Session(ws)

        @given(messages(["Speak", "Flush", "Clear"]) | st.binary(max_size=64))
        def check(message: str | bytes) -> None:
            session.send(message)
            session.send(json.dumps({"type": "Flush"}))
            replies = session.read_until(lambda m: isinstance(m, dict) and m.get("type") == "Flushed", native=False)
            for reply in replies:
                if isinstance(reply, dict) and reply.get("type") == "Warning":
                    assert reply["code"] in CODES and reply["description"], reply

        check()
        other.send_json({"type": "Speak", "text": "Still here."})
        other.send_json({"type": "Flush"})
        replies = read_until(other, lambda m: isinstance(m, dict) and m.get("type") == "Flushed", native=False)
        assert any(isinstance(m, bytes) and m for m in replies)


def test_the_openai_realtime_socket_answers_anything_and_the_other_session_goes_on(client: TestClient) -> None:
    url = "/v1/realtime?intent=transcription"
    types = ["session.update", "input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear"]
    with client.websocket_connect(url) as ws, client.websocket_connect(url) as other:
        receive(ws), receive(other)  # session.created
        session = Session(ws)

        def is_probe_answer(m: Any) -> bool:
            return isinstance(m, dict) and m.get("type") == "error" and m["error"].get("event_id") == "probe"

        appends = st.binary(max_size=4800).map(
            lambda audio: json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode()}))
        updates = st.builds(lambda s: json.dumps({"type": "session.update", "session": s}), JSON_VALUES)

        @given(messages(types) | updates | appends | st.binary(max_size=64))
        def check(message: str | bytes) -> None:
            session.send(message)
            session.send(json.dumps({"type": "probe", "event_id": "probe"}))
            for reply in session.read_until(is_probe_answer, native=False):
                if isinstance(reply, dict) and reply.get("type") == "error":
                    assert reply["error"]["message"] and reply["error"]["type"], reply

        check()
        other.send_json({"type": "input_audio_buffer.clear", "event_id": "still"})
        assert receive(other)["type"] == "input_audio_buffer.cleared"


def test_the_elevenlabs_http_route_never_answers_500(client: TestClient) -> None:
    bodies = JSON_VALUES.map(lambda v: json.dumps(v).encode()) | messages(["x"]).map(str.encode) | \
        st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(
            st.sampled_from(["text", "model_id", "voice_settings", "language_code", "seed"]), JSON_VALUES, max_size=4))

    @given(bodies)
    def check(body: bytes) -> None:
        r = client.post("/v1/text-to-speech/default/stream?output_format=pcm_16000", content=body,
                        headers={"Content-Type": "application/json"})
        assert r.status_code < 500, (r.status_code, r.text)
        if r.status_code >= 400:
            detail = r.json()["detail"]
            assert detail["status"] in CODES and detail["message"], detail

    check()
