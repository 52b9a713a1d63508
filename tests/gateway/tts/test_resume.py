"""Resuming a dropped /v1/tts session (resumable=true), in process with the fake
engine: numbered messages, the resent audio (byte for byte the uncut audio),
the kept messages' bound and the paused synthesis while the client is away, the
token's rules (exact codes and close codes), and the caps a held session counts
against.

A drop is ``ws.close()`` with the socket's context still open: leaving the
context would cancel the app's handler, which a real server never does."""

from __future__ import annotations

import time
import tracemalloc
from contextlib import ExitStack
from ipaddress import ip_network
from typing import Any

import numpy as np

from engines.base import SynthesisOptions
from gateway.audio import Encoding, encode
from gateway.resume_tokens import ResumeStore
from gateway.tts.kept import MAX_BYTES
from gateway.tts.resumable import ResumableTtsTransport
from tests.gateway.fakes import FRAME, FakeTtsEngine, expected_audio, frames_for, seed_for
from tests.gateway.fakes import _frame as fake_frame
from tests.gateway.helpers import tts_client
from tests.support.sockets import close_code, receive
from tests.support.waiting import wait_until

OPEN = "/v1/tts?resumable=true"
READY_KEYS = {"type", "session", "protocol", "engine", "voice", "sample_rate", "encoding", "frame_samples"}
TEXT = "A short line to say, twice over."  # 8 frames of the fake
LONG = "long"  # the fake engine is told how many frames this one has
FRAME_BYTES = FRAME * 2


def fake_pcm(text: str, frames: int, seed: int | None = None) -> bytes:
    """The fake engine's bytes for ``text`` when it makes ``frames`` frames of it (``frames_by_text``)."""
    rng = np.random.default_rng(seed_for(text, SynthesisOptions(seed=seed)))
    return encode(np.concatenate([fake_frame(rng) for _ in range(frames)]), Encoding.S16LE)


def resume_url(token: str, last_seq: int) -> str:
    return f"/v1/tts?resume={token}&last_seq={last_seq}"


def store_of(client: Any) -> ResumeStore[ResumableTtsTransport]:
    store = client.app_state["tts_resume"]
    assert isinstance(store, ResumeStore)
    return store


def live(client: Any) -> list[ResumableTtsTransport]:
    return list(store_of(client)._live.values())


def read_rest(ws: Any, until: str = "end") -> tuple[list[bytes], list[dict[str, Any]]]:
    """Frames and events up to the first event of type ``until``."""
    frames, events = [], []
    while True:
        message = receive(ws)
        if isinstance(message, bytes):
            frames.append(message)
            continue
        events.append(message)
        if message["type"] == until:
            return frames, events


def test_ready_carries_a_token_and_every_message_a_number(tmp_path):
    with tts_client(tmp_path) as client, client.websocket_connect(OPEN) as ws:
        ready = receive(ws)
        assert set(ready) == READY_KEYS | {"resume_token"}
        assert len(ready["resume_token"].split(".", 1)[1]) == 43  # after the replica's id
        ws.send_json({"type": "speak", "text": TEXT, "id": "a"})
        assert receive(ws) == {"type": "start", "id": "a", "text": TEXT, "seq": 1}
        frames, events = read_rest(ws)
        n = frames_for(TEXT)
        assert len(frames) == n and events[-1]["seq"] == n + 2
        ws.send_json({"type": "ack", "seq": n + 2})
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 1, "audio_s": round(n * 0.08, 3), "seq": n + 3}
        assert close_code(ws) == (1000, "")


def test_a_resume_resends_after_last_seq_and_the_audio_is_the_uncut_audio(tmp_path):
    engine = FakeTtsEngine(frames_by_text={LONG: 40})
    with tts_client(tmp_path, engine) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.send_json({"type": "speak", "text": LONG, "seed": 7})
        assert receive(first)["type"] == "start"
        got = [receive(first) for _ in range(5)]  # seq 2..6
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away and live(client)[0].kept.newest == 42,
                   "the synthesis went on into the kept messages while the client was away")
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 6)))
        ready = receive(second)
        assert ready == {"type": "ready", "session": ready["session"], "protocol": 1, "engine": "pocket",
                         "voice": "alba", "sample_rate": 24000, "encoding": "pcm_s16le", "frame_samples": FRAME,
                         "resumed": True, "last_seq": 42, "messages_received": 1,
                         "resume_token": ready["resume_token"]}
        assert ready["resume_token"] != token
        frames, events = read_rest(second)
        assert events[0]["seq"] == 42 and len(frames) == 35
        assert b"".join(got + frames) == fake_pcm(LONG, 40, seed=7)
        second.send_json({"type": "speak", "text": TEXT})  # the session goes on
        assert receive(second)["seq"] == 43
        second.send_json({"type": "end"})
        frames, events = read_rest(second, "closed")
        assert events[-1]["seq"] == 43 + frames_for(TEXT) + 2
        assert close_code(second) == (1000, "")


def test_away_the_synthesis_fills_the_kept_messages_then_pauses(tmp_path):
    total = MAX_BYTES // FRAME_BYTES + 100  # more than the kept messages hold
    engine = FakeTtsEngine(frames_by_text={LONG: total})
    with tts_client(tmp_path, engine) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.send_json({"type": "speak", "text": LONG})
        assert receive(first)["seq"] == 1
        first.close()

        def paused() -> bool:
            transports = live(client)
            return bool(transports) and transports[0].away and not transports[0].kept.has_room(FRAME_BYTES, False)

        wait_until(paused, "the kept messages are full")
        kept = live(client)[0].kept
        assert kept.bytes <= MAX_BYTES and kept.oldest == 1  # nothing dropped
        session = client.app_state["sessions"]
        queued = next(iter(session._entries.values())).describe()["queued_audio_s"]
        kept_frames = kept.newest - 1  # the start event, then frames
        # the frames made: the kept ones, the ~2 s outbound queue, one in the sender's hands, one waiting for room
        assert engine.frames_produced <= kept_frames + round(queued / 0.08) + 2 < total
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 1)))
        assert receive(second)["resumed"] is True
        frames, events = read_rest(second)
        assert engine.frames_produced == total  # it went on once the client was back
        assert b"".join(frames) == fake_pcm(LONG, total)
        assert events == [{**events[0], "type": "end", "frames": total, "seq": total + 2}]


def test_a_client_that_never_acks_loses_old_messages_while_attached(tmp_path):
    total = MAX_BYTES // FRAME_BYTES + 20
    engine = FakeTtsEngine(frames_by_text={LONG: total})
    with tts_client(tmp_path, engine) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.send_json({"type": "speak", "text": LONG})
        read_rest(first)
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        oldest = live(client)[0].kept.oldest
        with client.websocket_connect(resume_url(token, 0)) as ws:
            message = f"the messages after 0 are no longer kept (the oldest kept is {oldest}); open a new session"
            assert receive(ws) == {"type": "error", "code": "resume_lost", "message": message, "retryable": False}
            assert close_code(ws) == (4410, message)
        second = sockets.enter_context(client.websocket_connect(resume_url(token, total + 2)))
        assert receive(second)["last_seq"] == total + 2
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


def test_acks_are_checked_and_refused_on_a_session_that_keeps_nothing(tmp_path):
    with tts_client(tmp_path) as client:
        with client.websocket_connect(OPEN) as ws:
            receive(ws)
            ws.send_json({"type": "ack", "seq": 3})
            assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False, "seq": 1,
                                   "message": "ack.seq: 3 is beyond the last message this session sent (0)"}
            ws.send_json({"type": "ack", "seq": -1})
            assert receive(ws)["message"] == ("ack.seq must be a whole number from 0 to 9007199254740992 (the seq "
                                              "of the last message received), got '-1'")
        with client.websocket_connect("/v1/tts") as ws:
            receive(ws)
            ws.send_json({"type": "ack", "seq": 0})
            assert receive(ws) == {"type": "error", "code": "bad_message", "retryable": False,
                                   "message": "ack: this session keeps nothing to acknowledge; open it with "
                                              "resumable=true"}


def test_a_token_is_single_use_and_a_dictation_token_is_unknown_here(tmp_path):
    with tts_client(tmp_path) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        with client.websocket_connect("/v1/dictation?resume=" + token + "&last_seq=0") as ws:
            assert close_code(ws) == (4404, "no session of this server has that resume token; open a new session")
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 0)))
        assert receive(second)["resumed"] is True
        with client.websocket_connect(resume_url(token, 0)) as again:
            message = "that resume token was already used; resume with the token of the latest ready"
            assert receive(again) == {"type": "error", "code": "resume_used", "message": message, "retryable": False}
            assert close_code(again) == (4409, message)
        with client.websocket_connect(resume_url(token + "x", 0)) as unknown:
            assert close_code(unknown)[0] == 4404
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


def test_a_last_seq_beyond_the_sent_messages_is_refused_and_the_token_stays_good(tmp_path):
    with tts_client(tmp_path) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        with client.websocket_connect(resume_url(token, 7)) as ws:
            assert close_code(ws) == (4400, "last_seq: 7 is beyond the last message this session sent (0)")
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 0)))
        assert receive(second)["resumed"] is True
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


# two remote clients, known by their address (a trusted network), and a key holder
PROXY = {"forwarded_allow_ips": (ip_network("127.0.0.1/32"),), "api_key": "k" * 32,
         "trusted_networks": (ip_network("203.0.113.0/24"), ip_network("198.51.100.0/24"))}


def test_a_token_is_useless_to_another_principal(tmp_path):
    owner = {"X-Forwarded-For": "203.0.113.5"}
    other = {"X-Forwarded-For": "198.51.100.7"}
    with tts_client(tmp_path, **PROXY) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN, headers=owner))
        token = receive(first)["resume_token"]
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        for stranger in (other, {"Authorization": "Bearer " + "k" * 32, **owner}):
            with client.websocket_connect(resume_url(token, 0), headers=stranger) as ws:
                message = "that resume token belongs to a session another principal opened"
                assert receive(ws) == {"type": "error", "code": "resume_forbidden", "message": message,
                                       "retryable": False}
                assert close_code(ws) == (1008, message)
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 0), headers=owner))
        assert receive(second)["resumed"] is True
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


def test_past_the_grace_what_was_kept_is_collected_once_then_the_token_is_spent(tmp_path):
    with tts_client(tmp_path, resume_grace_s=0.5) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.send_json({"type": "speak", "text": TEXT, "seed": 3})
        first.close()
        wait_until(lambda: store_of(client).counts()["kept"] == 1, "the grace ended the session")
        with client.websocket_connect(resume_url(token, 0)) as ws:
            ready = receive(ws)
            n = frames_for(TEXT)
            assert (ready["ended"], ready["last_seq"], "resume_token" in ready) == (True, n + 2, False)
            frames, _ = read_rest(ws)
            assert b"".join(frames) == encode(expected_audio(TEXT, seed=3), Encoding.S16LE)
            message = ("the session ended: the client was away for more than 0.5 s; what it kept is above; "
                       "open a new session")
            assert receive(ws) == {"type": "error", "code": "resume_expired", "message": message, "retryable": False}
            assert close_code(ws) == (4410, message)
        with client.websocket_connect(resume_url(token, 0)) as ws:
            assert close_code(ws)[0] == 4409


def test_a_server_without_a_grace_refuses_resumable(tmp_path):
    with tts_client(tmp_path, resume_grace_s=0) as client, client.websocket_connect(OPEN) as ws:
        assert close_code(ws) == (4400, ("resumable: this server holds no session after a drop "
                                         "(VOXGATE_RESUME_GRACE_S=0); leave it out"))


def test_a_held_session_keeps_its_place_against_the_caps(tmp_path):
    with tts_client(tmp_path, max_tts_sessions=4, max_tts_sessions_per_client=1) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        with client.websocket_connect("/v1/tts") as ws:
            assert receive(ws)["code"] == "over_capacity"
            assert close_code(ws)[0] == 1013
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 0)))
        assert receive(second)["resumed"] is True
        second.send_json({"type": "end"})
        assert receive(second)["type"] == "closed"


FLOOD = 6


def test_a_flood_of_drops_that_never_resume_stays_within_the_kept_bound(tmp_path):
    engine = FakeTtsEngine(frames_by_text={LONG: MAX_BYTES // FRAME_BYTES * 4})
    tracemalloc.start()
    try:
        with tts_client(tmp_path, engine, max_tts_sessions=FLOOD, max_tts_sessions_per_client=FLOOD) as client, \
                ExitStack() as sockets:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(FLOOD):
                ws = sockets.enter_context(client.websocket_connect(OPEN))
                receive(ws)
                ws.send_json({"type": "speak", "text": LONG})
                ws.close()
            wait_until(lambda: len(live(client)) == FLOOD and all(
                t.away and not t.kept.has_room(FRAME_BYTES, False) for t in live(client)),
                "every dropped session filled its kept messages and paused")
            grown = tracemalloc.get_traced_memory()[0] - before
            with client.websocket_connect(OPEN) as ws:
                assert receive(ws)["code"] == "over_capacity"
    finally:
        tracemalloc.stop()
    # each held session: its kept messages (1 MiB), ~2 s of queued audio (96 KB) and the bookkeeping
    # (about 1.3 MiB in all); unbounded, each would hold the whole utterance (4 MiB)
    assert grown < FLOOD * 2 * MAX_BYTES, grown
    print(f"memory held by {FLOOD} dropped sessions: {grown} bytes, {engine.frames_produced} frames made")
    assert engine.frames_produced < FLOOD * (MAX_BYTES // FRAME_BYTES + 40)


def test_a_session_that_ended_while_its_client_was_away_is_collected_with_its_close(tmp_path):
    with tts_client(tmp_path) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.send_json({"type": "speak", "text": TEXT})
        first.send_json({"type": "end"})
        first.close()
        wait_until(lambda: store_of(client).counts()["kept"] == 1, "the session finished its work and ended")
        with client.websocket_connect(resume_url(token, 0)) as ws:
            ready = receive(ws)
            n = frames_for(TEXT)
            assert (ready["ended"], ready["last_seq"], ready["messages_received"]) == (True, n + 3, 2)
            frames, events = read_rest(ws, "closed")
            assert b"".join(frames) == encode(expected_audio(TEXT), Encoding.S16LE)
            assert [e["type"] for e in events] == ["start", "end", "closed"]
            assert close_code(ws) == (1000, "")


def test_the_idle_timeout_does_not_end_a_session_whose_client_is_away(tmp_path):
    with tts_client(tmp_path, idle_timeout_s=0.2) as client, ExitStack() as sockets:
        first = sockets.enter_context(client.websocket_connect(OPEN))
        token = receive(first)["resume_token"]
        first.close()
        wait_until(lambda: live(client) and live(client)[0].away, "the session is held")
        time.sleep(1.0)  # five idle timeouts: the watchdog ticks every 50 ms
        second = sockets.enter_context(client.websocket_connect(resume_url(token, 0)))
        ready = receive(second)
        assert "ended" not in ready and "resume_token" in ready
        second.send_json({"type": "speak", "text": TEXT})
        assert receive(second) == {"type": "start", "id": "u1", "text": TEXT, "seq": 1}
