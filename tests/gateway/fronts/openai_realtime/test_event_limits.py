"""The size of an OpenAI Realtime client event is judged before it is parsed:
64 KiB for every event but ``input_audio_buffer.append``, which may carry a
whole audio message when it is one flat object; past that, close 1009 naming
the limit. The drain's refuser reads by the same rule and answers ``too_large``.
(In process, with a fake sidecar; memory measured with tracemalloc.)"""

from __future__ import annotations

import base64
import json
import tracemalloc

import pytest

from tests.gateway.fronts.openai_realtime.talk import URL, append, opened, sync
from tests.gateway.helpers import dictation_client, drain_marks, start_drain, wait_for
from tests.support.fake_sidecar import FakeSidecar
from tests.support.sockets import close_code, next_close, receive

NESTED_BYTES = 1_390_000  # within an append's limit, so only its shape can refuse it
GOING_AWAY = (1001, "server stopping; every final is sent; retry on a new connection")


def too_large(size: int) -> str:
    return (f"event of {size} bytes; the limit is 65536 for any event but a flat input_audio_buffer.append "
            "(up to 1402197)")


def nested_append(size: int) -> str:
    """An append whose audio is an array of a few hundred thousand empty arrays."""
    head, tail = '{"type": "input_audio_buffer.append", "event_id": "evt_n", "audio": [', "[]]}"
    return head + "[]," * ((size - len(head) - len(tail)) // 3) + tail


def big_update() -> str:
    return json.dumps({"type": "session.update", "event_id": "evt_u", "session": {
        "type": "transcription", "audio": {"input": {"transcription": {"prompt": "word " * 20_000}}}}})


@pytest.mark.parametrize("audio_first", [False, True], ids=["before-audio", "after-audio"])
def test_a_non_append_event_over_64_kib_closes_1009(tmp_path, audio_first):
    event = big_update()
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        if audio_first:
            append(ws, b"\0\0" * 2400)
            sync(ws)
        ws.send_text(event)
        assert close_code(ws) == (1009, too_large(len(event)))


def test_a_nested_append_is_refused_unparsed(tmp_path):
    event = nested_append(NESTED_BYTES)
    with dictation_client(tmp_path) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        tracemalloc.start()
        try:
            ws.send_text(event)
            closed = close_code(ws)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert closed == (1009, too_large(len(event)))
    # the message itself is held a few times on its way; parsed, it would be some 30 MB of lists
    assert peak < 12 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"


def test_a_whole_audio_message_in_one_flat_append_is_taken(tmp_path):
    fake = FakeSidecar()
    pcm = b"\1\0" * (1024 * 1024 // 2)  # 1 MiB of audio, the most one message may carry
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        opened(ws)
        ws.send_json({"type": "input_audio_buffer.append", "event_id": "evt_big",
                      "audio": base64.b64encode(pcm).decode()})
        sync(ws)
    assert sum(len(payload) for header, payload in fake.frames if header["op"] == "audio") > 0


def test_the_drain_refuser_answers_a_huge_event_too_large_unparsed(tmp_path):
    fake = FakeSidecar()
    event = nested_append(NESTED_BYTES)
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(URL) as ws:
        prefix = opened(ws)
        append(ws, b"\1\0" * 24000)
        sync(ws)
        drained = start_drain(client)
        wait_for(lambda: drain_marks(fake), "the drain's finalize")
        ws.send_text(event)
        refused = receive(ws)
        ws.send_text(big_update())
        refused_update = receive(ws)
        (mark,) = drain_marks(fake)
        fake.play_from_thread(client, {"ev": "finalized", "id": mark})
        assert next_close(ws) == GOING_AWAY
        assert drained.result(timeout=10) is True
    assert refused == {"type": "error", "event_id": f"event_{prefix}00003", "error": {
        "type": "invalid_request_error", "code": "too_large", "message": too_large(len(event)), "param": None,
        "event_id": None}}
    assert refused_update["error"]["message"] == too_large(len(big_update()))
