"""/v1/tts over a real uvicorn on 127.0.0.1 with the fake engine: the Python
client, incremental text, the slow reader and eight concurrent sockets."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gateway.audio import Encoding, encode
from gateway.client.base import ws_url
from gateway.client.tts import TtsClient, TtsClosed, TtsError
from tests.gateway.fakes import FakeTtsEngine, expected_audio, frames_for
from tests.gateway.helpers import tts_app
from tests.support.net import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


async def test_client_speaks_and_closes(tmp_path):
    engine = FakeTtsEngine()
    async with running_server(tts_app(tmp_path, engine)) as url:
        async with await TtsClient.connect(url) as tts:
            assert tts.ready["sample_rate"] == 24000
            text = "The client says hello."
            utt = await tts.synthesize(text, seed=9)
            assert utt.id == "u1" and utt.frames == frames_for(text)
            assert utt.audio == encode(expected_audio(text, seed=9), Encoding.S16LE)
            assert utt.end["frames"] == utt.frames and utt.ttfa_s is not None
            assert await tts.close() == {"type": "closed", "utterances": 1, "audio_s": round(utt.frames * 0.08, 3)}


async def test_client_refusal_carries_the_code(tmp_path):
    async with running_server(tts_app(tmp_path, FakeTtsEngine())) as url:
        with pytest.raises(TtsError) as info:
            await TtsClient.connect(url, voice="nobody")
        assert info.value.code == "unknown_voice"
        assert info.value.close_code == 4400


async def test_first_sentence_plays_before_the_last_fragment_is_sent(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.01)
    async with running_server(tts_app(tmp_path, engine)) as url:
        async with await TtsClient.connect(url) as tts:
            await tts.text("The first sentence")
            await tts.text(" is complete. And the second")
            # If the server waited for the end of the turn, this would time out.
            start = await tts.receive(10)
            assert start == {"type": "start", "id": "u1", "text": "The first sentence is complete."}
            assert isinstance(await tts.receive(10), bytes)
            assert [s.text for s in engine.streams] == ["The first sentence is complete."]
            await tts.text(" one is not finished yet")
            await tts.flush()
            rest = await tts.collect(10)  # the rest of u1
            second = await tts.collect(10)
            assert (rest.end["id"], second.start["text"]) == ("u1", "And the second one is not finished yet")


def small_buffer_socket(port: int) -> socket.socket:
    """A client socket with a tiny receive buffer, so a client that stops reading
    fills the TCP path quickly and the server's own queue is what holds the audio."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


async def admin_sessions(url: str) -> dict[str, dict]:
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        return {s["id"]: s for s in (await http.get("/v1/admin/sessions")).json()["sessions"]}


async def test_slow_reader_is_bounded_does_not_slow_others_and_is_closed_4408(tmp_path):
    story = "a very long story"
    engine = FakeTtsEngine(frames_by_text={story: 3000})  # 240 s of audio, produced as fast as it is taken
    app = tts_app(tmp_path, engine, idle_timeout_s=3)
    async with running_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        stalled = await connect(ws_url(url, "/v1/tts"), sock=small_buffer_socket(port), max_queue=2)
        ready = json.loads(await stalled.recv())
        await stalled.send(json.dumps({"type": "speak", "text": story}))
        # Wait until the server's send is blocked: the client reads nothing from here on.
        queued_max = 0.0
        for _ in range(200):
            mine = (await admin_sessions(url)).get(ready["session"])
            queued_max = max(queued_max, mine["queued_audio_s"])
            if mine["send_blocked_s"] > 0.3:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"the server never blocked on the stalled client: {mine}")
        produced = engine.streams[0].produced
        assert produced < 3000

        # Another socket gets its complete audio while the first one is stalled.
        async with await TtsClient.connect(url) as other:
            text = "Meanwhile another client is served."
            utt = await other.synthesize(text, seed=3)
            assert utt.audio == encode(expected_audio(text, seed=3), Encoding.S16LE)
        mine = (await admin_sessions(url))[ready["session"]]
        assert mine["state"] == "open" and mine["send_blocked_s"] > 0  # still stalled meanwhile

        # The stalled session never held more than ~2 s and generated nothing more.
        for _ in range(200):
            sessions = await admin_sessions(url)
            mine = sessions.get(ready["session"])
            if mine is None or mine["state"] == "closing":
                break
            queued_max = max(queued_max, mine["queued_audio_s"])
            await asyncio.sleep(0.05)
        assert 1.9 <= queued_max <= 2.0
        assert engine.streams[0].produced <= produced + 1
        assert engine.streams[0].cancelled

        # Reading again drains what was in flight, then the close: 4408.
        frames = 0
        with pytest.raises(ConnectionClosed) as info:
            while True:
                message = await asyncio.wait_for(stalled.recv(), 10)
                frames += isinstance(message, bytes)
        assert (info.value.rcvd.code, info.value.rcvd.reason) == (4408, "client read nothing for 3 s")
        assert 0 < frames <= produced


async def test_eight_concurrent_sockets_get_correct_complete_audio(tmp_path):
    engine = FakeTtsEngine(frame_delay_s=0.002)
    async with running_server(tts_app(tmp_path, engine, max_tts_sessions_per_client=8)) as url:
        async def one(i: int) -> tuple[int, bytes, bytes]:
            text = f"Socket number {i} says a sentence of its own."
            async with await TtsClient.connect(url) as tts:
                utt = await tts.synthesize(text, seed=100 + i)
                await tts.close()
            return i, utt.audio, encode(expected_audio(text, seed=100 + i), Encoding.S16LE)

        results = await asyncio.gather(*(one(i) for i in range(8)))
    assert len(results) == 8
    for i, got, want in results:
        assert got == want, f"socket {i} got different audio"
    assert len({got for _, got, _ in results}) == 8


async def test_closed_socket_raises_tts_closed(tmp_path):
    async with running_server(tts_app(tmp_path, FakeTtsEngine())) as url:
        tts = await TtsClient.connect(url)
        await tts.end()
        assert await tts.receive(5) == {"type": "closed", "utterances": 0, "audio_s": 0.0}
        with pytest.raises(TtsClosed) as info:
            await tts.receive(5)
        assert info.value.code == 1000
