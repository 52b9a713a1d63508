"""/v1/dictation against the bombs of tests/support/stream_bombs.py, in
process with the fake sidecar, under an address-space cap (unbounded decoding
asked for gigabytes): the exact error event and close code, decoding on a
worker thread and not the event loop's, and a message decoded a step at a time
with the pacer holding between steps."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from gateway.codecs import decoders
from gateway.codecs.opus import MAX_EMPTY_PACKETS_IN_A_ROW, OpusDecoder
from gateway.dictation import pacing
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.media import opus_packets, tone
from tests.support.sockets import close_code, receive
from tests.support.stream_bombs import (
    EMPTY_120MS,
    TINY_120MS,
    address_space_cap,
    endless_packet_pages,
    mulaw_message,
    ogg_opus_bomb,
    ogg_opus_stream,
    webm_opus_bomb,
)

EMPTY_RUN = (f"{MAX_EMPTY_PACKETS_IN_A_ROW + 1} Opus packets in a row carry no audio (every frame empty: DTX or "
             f"padding); at most {MAX_EMPTY_PACKETS_IN_A_ROW} are accepted, send the audio itself (turn DTX off)")


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each Opus packet and G.711 block decoded: whether an event loop runs
    in the thread that decodes it (True: it ran on the loop)."""
    seen: list[bool] = []

    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    opus_decode = OpusDecoder.decode
    mulaw = decoders.mulaw_decode

    def opus_watched(self: OpusDecoder, packet: bytes) -> np.ndarray:
        seen.append(on_loop())
        return opus_decode(self, packet)

    def mulaw_watched(data: bytes) -> np.ndarray:
        seen.append(on_loop())
        return mulaw(data)

    monkeypatch.setattr(OpusDecoder, "decode", opus_watched)
    monkeypatch.setattr(decoders, "mulaw_decode", mulaw_watched)
    return seen


def refused(tmp_path: Any, encoding: str, messages: list[bytes]) -> tuple[dict[str, Any], tuple[int, str]]:
    """The event and the close after ``messages``, sent under the address-space cap."""
    with address_space_cap(), dictation_client(tmp_path) as client, \
            client.websocket_connect(f"/v1/dictation?encoding={encoding}") as ws:
        receive(ws)
        for message in messages:
            ws.send_bytes(message)
        return receive(ws), close_code(ws)


def bad_audio(message: str) -> dict[str, Any]:
    return {"type": "error", "code": "bad_audio", "retryable": False, "message": message}


@pytest.mark.parametrize(("encoding", "bomb"), [("ogg", ogg_opus_bomb()), ("webm", webm_opus_bomb())])
def test_a_container_of_empty_opus_packets_gets_bad_audio_then_4400(tmp_path, threads, encoding, bomb):
    event, close = refused(tmp_path, encoding, [bomb])
    message = f"{EMPTY_RUN}; the {encoding} stream cannot be read past this point"
    assert event == bad_audio(message)
    assert close == (4400, message[:123])
    assert threads == [False] * (MAX_EMPTY_PACKETS_IN_A_ROW + 1)


def test_an_ogg_message_decoding_past_its_budget_gets_bad_audio_then_4400(tmp_path, threads):
    event, close = refused(tmp_path, "ogg", [ogg_opus_bomb(1000, TINY_120MS)])
    message = ("a message of 5203 bytes decodes to more than 14.9 s of audio; the limit is 1 s plus 3 kbit/s of its "
               "bytes (1 s per 375 bytes); the ogg stream cannot be read past this point")
    assert event == bad_audio(message)
    assert close == (4400, message[:123])
    assert threads and not any(threads)


def test_pages_of_new_streams_whose_packet_never_ends_are_refused_at_2_mib(tmp_path):
    messages = [ogg_opus_stream([])] + [endless_packet_pages(first_serial=100 * i + 1) for i in range(3)]
    event, close = refused(tmp_path, "ogg", messages)
    silent = sum(len(m) for m in messages)
    message = (f"the Ogg stream sent {silent} bytes without any audio; the limit is 2097152 bytes (2 MiB) without "
               "audio; the ogg stream cannot be read past this point")
    assert event == bad_audio(message)
    assert close == (4400, message[:123])


def test_pages_each_beginning_a_stream_are_refused_past_8_open_streams(tmp_path):
    header = ogg_opus_stream([])
    pages = endless_packet_pages(bos=True)
    event, close = refused(tmp_path, "ogg", [header + pages])
    offset = len(header) + 7 * len(pages) // 16  # the header's stream and 7 more are open
    message = (f"Ogg page at byte {offset} begins a logical stream while 8 are open; at most 8 are accepted; "
               "the ogg stream cannot be read past this point")
    assert event == bad_audio(message)
    assert close == (4400, message[:123])


def test_raw_empty_opus_packets_past_the_run_are_dropped_and_the_stream_goes_on(tmp_path, threads):
    fake = FakeSidecar()
    real = opus_packets(tone(0.1, 16000), 16000)
    with dictation_client(tmp_path, fake) as client, client.websocket_connect("/v1/dictation?encoding=opus") as ws:
        receive(ws)
        for _ in range(MAX_EMPTY_PACKETS_IN_A_ROW + 2):
            ws.send_bytes(EMPTY_120MS)
        ws.send_bytes(real[0])
        ws.send_json({"type": "end"})
        events = [receive(ws) for _ in range(3)]
        assert close_code(ws) == (1000, "")
    dropped = bad_audio(f"{EMPTY_RUN}; the message was dropped")
    second = bad_audio(dropped["message"].replace(f"{MAX_EMPTY_PACKETS_IN_A_ROW + 1} Opus",
                                                  f"{MAX_EMPTY_PACKETS_IN_A_ROW + 2} Opus"))
    assert events == [dropped, second, {"type": "closed", "utterances": 0, "audio_s": 1.22}]
    stream = fake.frames[0][0]["stream"]
    assert len(fake.audio_sent(stream)) == MAX_EMPTY_PACKETS_IN_A_ROW * 1920 + 320  # 10 x 120 ms + 20 ms
    assert threads == [False] * (MAX_EMPTY_PACKETS_IN_A_ROW + 3)


class FakeClock:
    """The pacer's clock, moved only by its pauses; each pause also notes how
    many G.711 blocks were decoded by then."""

    def __init__(self, decoded: list[bool]) -> None:
        self.now = 100.0
        self.decoded = decoded
        self.pauses: list[tuple[float, int]] = []

    def monotonic(self) -> float:
        return self.now

    async def pause(self, delay_s: float, until: asyncio.Future[Any]) -> None:
        self.pauses.append((round(delay_s, 6), len(self.decoded)))
        self.now += delay_s


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, threads: list[bool]) -> FakeClock:
    fake = FakeClock(threads)
    monkeypatch.setattr(pacing, "monotonic", fake.monotonic)
    monkeypatch.setattr(pacing, "pause", fake.pause)
    return fake


def test_a_megabyte_of_mulaw_is_decoded_off_the_loop_a_step_at_a_time_as_the_pacer_allows(tmp_path, clock):
    fake = FakeSidecar()
    message = mulaw_message()  # 131 s of 8 kHz audio in one message
    with address_space_cap(), dictation_client(tmp_path, fake, dictation_max_ahead_s=2.0) as client, \
            client.websocket_connect("/v1/dictation?encoding=mulaw") as ws:
        receive(ws)
        ws.send_bytes(message)
        ws.send_json({"type": "end"})
        assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 131.072}
    blocks = len(message) // decoders.BLOCK_SAMPLES  # each block of 2.048 s is one step
    assert clock.decoded == [False] * blocks
    # the first step already passes the 2 s allowance: a pause after every step, before the next is decoded
    assert [decoded for _, decoded in clock.pauses] == list(range(1, blocks + 1))
    assert sum(delay for delay, _ in clock.pauses) == pytest.approx(131.072 - 2.0, abs=0.01)
    assert len(fake.audio_sent(fake.frames[0][0]["stream"])) == 2 * len(message)


def test_an_f32_message_with_a_nan_past_its_first_block_is_dropped_whole(tmp_path):
    fake = FakeSidecar()
    samples = np.full(3 * decoders.BLOCK_SAMPLES, 0.25, dtype="<f4")
    samples[-1] = np.nan
    with dictation_client(tmp_path, fake) as client, \
            client.websocket_connect("/v1/dictation?encoding=pcm_f32le") as ws:
        receive(ws)
        ws.send_bytes(samples.tobytes())
        ws.send_bytes(np.full(1600, 0.5, dtype="<f4").tobytes())
        ws.send_json({"type": "end"})
        assert receive(ws) == bad_audio("pcm_f32le audio contains NaN or infinite samples; the message was dropped")
        assert receive(ws) == {"type": "closed", "utterances": 0, "audio_s": 0.1}
    assert len(fake.audio_sent(fake.frames[0][0]["stream"])) == 1600
