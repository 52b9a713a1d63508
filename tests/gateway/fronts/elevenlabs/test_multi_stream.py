"""ElevenLabs' multi-stream-input socket in process: one TTS session per
context, tagged audio and isFinal per context, keepalives, close_context that
finishes flushed text or stops at once (barge-in: within one frame, the
session's slot freed), close_socket, the per-socket context limit and the
gateway's session limit counting every context."""

from __future__ import annotations

import time

from tests.gateway.fakes import FakeStream, FakeTtsEngine
from tests.gateway.fronts.elevenlabs.reading import MULTI, Heard, pcm_of, read_until_final
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive

URL = MULTI + "?output_format=pcm_24000"


class CancelRecordingStream(FakeStream):
    """A fake stream that remembers how many frames it had made when it was cancelled."""

    produced_at_cancel: int | None = None

    def cancel(self) -> None:
        if self.produced_at_cancel is None:
            self.produced_at_cancel = self.produced
        super().cancel()


class RecordingEngine(FakeTtsEngine):
    def open_stream(self, text, voice=None, options=None):
        stream = CancelRecordingStream(self, text, voice, options)
        self.streams.append(stream)
        return stream


def tts_sessions(client) -> int:
    return sum(1 for s in client.get("/v1/admin/sessions").json()["sessions"] if s["kind"] == "tts")


def test_two_contexts_each_get_their_own_audio_and_is_final(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": " ", "context_id": "a", "voice_settings": {"speed": 1.0}})
        ws.send_json({"text": " ", "context_id": "b"})
        ws.send_json({"text": "First context. ", "context_id": "a"})
        ws.send_json({"text": "Second context. ", "context_id": "b", "flush": True})
        ws.send_json({"context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        ws.send_json({"context_id": "b", "close_context": True})
        heard: dict = {}
        read_until_final(ws, context="a", contexts=heard)
        if not heard.get("b", Heard()).final:
            read_until_final(ws, context="b", contexts=heard)
        ws.send_json({"close_socket": True})
        assert close_code(ws) == (1000, "")
    assert heard["a"].audio == pcm_of("First context.") and heard["b"].audio == pcm_of("Second context.")
    assert (heard["a"].chars, heard["b"].chars) == ("First context.", "Second context.")
    assert None not in heard  # every message of this socket names its context


def test_close_context_after_a_flush_finishes_the_flushed_text(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.01)
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "Spoken to the end. And this too. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        heard = read_until_final(ws, context="a")
    assert heard.audio == pcm_of("Spoken to the end.", "And this too.")


def test_close_context_on_unflushed_text_stops_within_one_frame_and_frees_the_slot(tmp_path):
    engine = RecordingEngine(frame_delay_s=0.05, frames_by_text={"A long answer that gets interrupted.": 400})
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "A long answer that gets interrupted. ", "context_id": "a"})
        assert receive(ws)["audio"] and receive(ws)["audio"]
        assert tts_sessions(client) == 1
        ws.send_json({"context_id": "a", "close_context": True})
        heard = read_until_final(ws, context="a")
        assert tts_sessions(client) == 0  # the context's session is gone, its registry slot free
        stream = engine.streams[-1]
        assert stream.cancelled and stream.closed  # the engine stream was cancelled and closed
        assert stream.produced <= stream.produced_at_cancel + 1  # at most the frame in flight
        assert heard.chunks + 2 <= stream.produced_at_cancel  # nothing made after the cancel was sent
        # the socket goes on: a new context with the same id is a fresh one
        ws.send_json({"text": "Next turn. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        assert read_until_final(ws, context="a").audio == pcm_of("Next turn.")


def test_a_second_close_context_stops_the_flushed_text_at_once(tmp_path):
    engine = RecordingEngine(frame_delay_s=0.05, frames_by_text={"Flushed but interrupted.": 400})
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "Flushed but interrupted. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})  # the end of the turn: finish it
        assert receive(ws)["audio"]
        ws.send_json({"context_id": "a", "close_context": True})  # the user barged in
        read_until_final(ws, context="a")
        stream = engine.streams[-1]
        assert stream.cancelled and stream.produced <= stream.produced_at_cancel + 1 < 400


def test_text_after_close_context_is_ignored(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.01)
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "Kept. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        ws.send_json({"text": "Ignored. ", "context_id": "a", "flush": True})
        heard = read_until_final(ws, context="a")
    assert heard.audio == pcm_of("Kept.") and [s.text for s in engine.streams] == ["Kept."]


def test_close_socket_finishes_flushed_contexts_then_closes_1000(tmp_path):
    with tts_client(tmp_path, FakeTtsEngine(frame_delay_s=0.01)) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "Before the close. ", "context_id": "a", "flush": True})
        ws.send_json({"close_socket": True})
        heard = read_until_final(ws, context="a")
        assert close_code(ws) == (1000, "")
    assert heard.audio == pcm_of("Before the close.")


def test_close_socket_with_no_context_closes_at_once(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": ""})  # a socket keepalive opens nothing
        ws.send_json({"close_socket": True})
        assert close_code(ws) == (1000, "")


def test_messages_without_a_context_id_address_the_default_context(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        ws.send_json({"text": "No id. ", "flush": True})
        ws.send_json({"close_context": True})
        heard = read_until_final(ws, context="default")
    assert heard.audio == pcm_of("No id.")


def test_keepalives_hold_a_context_past_its_inactivity_timeout(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL + "&inactivity_timeout=1") as ws:
        ws.send_json({"text": " ", "context_id": "a"})
        for _ in range(5):
            time.sleep(0.4)
            ws.send_json({"text": "", "context_id": "a"})
        ws.send_json({"text": "Still open. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        assert read_until_final(ws, context="a").audio == pcm_of("Still open.")


def test_an_idle_context_ends_with_its_is_final_and_the_socket_stays(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL + "&inactivity_timeout=1") as ws:
        ws.send_json({"text": " ", "context_id": "a"})
        assert receive(ws) == {"isFinal": True, "contextId": "a"}
        ws.send_json({"text": "A new one. ", "context_id": "b", "flush": True})
        ws.send_json({"context_id": "b", "close_context": True})
        assert read_until_final(ws, context="b").audio == pcm_of("A new one.")


def test_at_most_five_contexts_on_one_socket(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=10, max_tts_sessions_per_client=10) as client, \
            client.websocket_connect(URL) as ws:
        for n in range(5):
            ws.send_json({"text": " ", "context_id": f"c{n}"})
        ws.send_json({"text": " ", "context_id": "c5"})
        assert receive(ws) == {"message": "at most 5 contexts are open on one socket; close one first "
                                          "(close_context)", "error": "over_capacity", "code": 503,
                               "contextId": "c5"}
        assert receive(ws) == {"isFinal": True, "contextId": "c5"}
        assert tts_sessions(client) == 5


def test_every_context_counts_against_the_session_limit(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=2, max_tts_sessions_per_client=2) as client, \
            client.websocket_connect(URL) as ws:
        ws.send_json({"text": " ", "context_id": "a"})
        ws.send_json({"text": " ", "context_id": "b"})
        ws.send_json({"text": " ", "context_id": "c"})
        assert receive(ws) == {"message": "too many TTS sessions (limit 2); try again later",
                               "error": "over_capacity", "code": 503, "contextId": "c"}
        assert receive(ws) == {"isFinal": True, "contextId": "c"}
        ws.send_json({"context_id": "a", "close_context": True})
        assert receive(ws) == {"isFinal": True, "contextId": "a"}
        ws.send_json({"text": "Now there is room. ", "context_id": "c", "flush": True})
        ws.send_json({"context_id": "c", "close_context": True})
        assert read_until_final(ws, context="c").audio == pcm_of("Now there is room.")


def test_a_socket_with_no_context_closes_4408_after_inactivity_timeout(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(URL + "&inactivity_timeout=1") as ws:
        ws.send_json({"text": " ", "context_id": "a"})
        assert receive(ws) == {"isFinal": True, "contextId": "a"}  # the context idles out first
        assert close_code(ws) == (4408, "no text received for 1 s (inactivity_timeout)")


def test_the_socket_idle_time_counts_from_the_end_of_its_last_context(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.05, frames_by_text={"Longer than the timeout.": 30})
    with tts_client(tmp_path, engine) as client, client.websocket_connect(URL + "&inactivity_timeout=1") as ws:
        ws.send_json({"text": "Longer than the timeout. ", "context_id": "a", "flush": True})
        ws.send_json({"context_id": "a", "close_context": True})
        assert len(read_until_final(ws, context="a").audio) == 30 * 1920 * 2  # 1.5 s of speaking
        time.sleep(0.7)  # quiet past an idle check, but less than the timeout since the context ended
        ws.send_json({"text": "Still served. ", "context_id": "b", "flush": True})
        ws.send_json({"context_id": "b", "close_context": True})
        assert read_until_final(ws, context="b").audio == pcm_of("Still served.")
