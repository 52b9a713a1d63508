"""The drain before a stop on the ElevenLabs front, in process with the fake
engine: stream-input speaks what it was sent (its buffer flushed as at EOS),
then ``isFinal`` and 1001; multi-stream-input finishes every context, each
with its ``isFinal``, refuses new text and new contexts, then 1001; the HTTP
stream in flight finishes and a new one gets 503. (SIGTERM on a real process:
tests/e2e/test_drain.py.)"""

from __future__ import annotations

import asyncio
import base64
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.gateway.fakes import FakeStream, FakeTtsEngine
from tests.gateway.fronts.elevenlabs.reading import MULTI, STREAM, Heard, pcm_of, read_until_final
from tests.gateway.helpers import draining, start_drain, tts_client, wait_for
from tests.support.sockets import close_code, next_close, receive

GOING_AWAY = (1001, "server stopping; retry on a new connection")
DRAINING = "the server is draining before it stops; retry (another replica will answer)"
NOT_TAKEN = ("text was not taken: the server is stopping; the text sent before is spoken, send the rest again on a "
             "new connection")


def take(heard: Heard, message: dict) -> None:
    """Count a message read before ``read_until_final`` took over."""
    heard.audio += base64.b64decode(message["audio"])
    heard.chars += "".join(message["alignment"]["chars"])


def not_taken(context_id: str | None = None) -> dict:
    error = {"message": NOT_TAKEN, "error": "draining", "code": 503}
    return {**error, "contextId": context_id} if context_id is not None else error


def test_stream_input_speaks_what_it_was_sent_then_is_final_and_1001(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    with tts_client(tmp_path, engine) as client, client.websocket_connect(STREAM + "?output_format=pcm_24000") as ws:
        ws.send_json({"text": " "})
        ws.send_json({"text": "Hello there. Half a sen"})  # the second sentence is still in the buffer
        heard = Heard()
        take(heard, receive(ws))
        drained = start_drain(client)
        wait_for(lambda: draining(client), "ready is 503")
        ws.send_json({"text": "After the drain began. "})
        heard = read_until_final(ws, contexts={None: heard})
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True
    assert heard.errors == [not_taken()]
    assert heard.chars == "Hello there. Half a sen"
    assert heard.audio == pcm_of("Hello there.", "Half a sen")


@pytest.mark.parametrize("url", [STREAM, MULTI], ids=["stream-input-nothing-sent", "multi-stream-no-context"])
def test_a_socket_with_no_work_closes_1001_at_once(tmp_path, url):
    with tts_client(tmp_path) as client, client.websocket_connect(url) as ws:
        drained = start_drain(client)
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True


def test_multi_stream_finishes_every_context_refuses_new_text_and_contexts_then_1001(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02)
    with tts_client(tmp_path, engine) as client, \
            client.websocket_connect(MULTI + "?output_format=pcm_24000") as ws:
        ws.send_json({"text": "Flushed and speaking. ", "context_id": "a", "flush": True})
        ws.send_json({"text": "Not flushed yet", "context_id": "b"})
        first = receive(ws)
        assert first["contextId"] == "a"
        heard: dict[str | None, Heard] = {"a": Heard()}
        take(heard["a"], first)
        drained = start_drain(client)
        wait_for(lambda: draining(client), "ready is 503")
        ws.send_json({"text": "More for a. ", "context_id": "a"})
        ws.send_json({"text": "A new context. ", "context_id": "c"})
        read_until_final(ws, context="c", contexts=heard)
        for context in ("a", "b"):
            if not heard.get(context, Heard()).final:
                read_until_final(ws, context=context, contexts=heard)
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True
    assert heard["a"].errors == [not_taken("a")]
    assert heard["c"].errors == [{"message": DRAINING, "error": "draining", "code": 503, "contextId": "c"}]
    assert (heard["c"].audio, heard["c"].final) == (b"", True)
    assert heard["a"].audio == pcm_of("Flushed and speaking.")
    assert heard["b"].audio == pcm_of("Not flushed yet")  # flushed by the drain, spoken whole
    assert (heard["a"].chars, heard["b"].chars) == ("Flushed and speaking.", "Not flushed yet")


def test_at_the_deadline_a_context_stops_gets_its_is_final_and_the_socket_1001(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.02, frames_by_text={"Endless.": 100_000})
    with tts_client(tmp_path, engine, drain_s=0) as client, \
            client.websocket_connect(MULTI + "?output_format=pcm_24000") as ws:
        ws.send_json({"text": "Endless. ", "context_id": "a", "flush": True})
        assert receive(ws)["audio"]
        drained = start_drain(client)
        heard = read_until_final(ws, context="a")
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is False
    assert heard.errors == [] and engine.streams[0].cancelled


def test_a_new_socket_while_draining_gets_a_draining_error_and_1013(tmp_path):
    with tts_client(tmp_path) as client:
        assert start_drain(client).result(timeout=10) is True
        for path in (STREAM, MULTI):
            with client.websocket_connect(path) as ws:
                assert receive(ws) == {"message": DRAINING, "error": "draining", "code": 503}
                assert close_code(ws) == (1013, DRAINING)


class GatedEngine(FakeTtsEngine):
    """Each stream yields one frame, then waits for ``gate`` (set on the app's loop by the test)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    def open_stream(self, text, voice=None, options=None):
        stream = GatedStream(self, text, voice, options)
        self.streams.append(stream)
        return stream


class GatedStream(FakeStream):
    async def frames(self):
        async for frame in super().frames():
            yield frame
            await asyncio.wait_for(self.engine.gate.wait(), 30)


def test_an_http_stream_in_flight_finishes_and_a_new_one_gets_503(tmp_path):
    engine = GatedEngine()
    url = "/v1/text-to-speech/alba/stream?output_format=pcm_24000"
    with tts_client(tmp_path, engine) as client, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(client.post, url, json={"text": "Finished after the drain began."})
        wait_for(lambda: engine.streams and engine.streams[0].produced == 1, "the first frame")
        drained = start_drain(client)
        wait_for(lambda: draining(client), "ready is 503")
        refused = client.post(url, json={"text": "Too late."})
        client.portal.call(engine.gate.set)
        r = answer.result(timeout=30)
        assert drained.result(timeout=10) is True
    assert (r.status_code, r.content) == (200, pcm_of("Finished after the drain began."))
    assert (refused.status_code, refused.headers["retry-after"], refused.json()) == (
        503, "1", {"detail": {"status": "draining", "message": DRAINING}})
