"""/v1/dictation with compressed and telephony audio, in process with the
fake sidecar: what reaches the recognizer, and what a bad stream gets."""

from __future__ import annotations

import pytest

from gateway.codecs.g711 import alaw_encode, mulaw_encode
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.media import ffmpeg_file, ffmpeg_video_only, opus_packets, tone
from tests.support.sockets import close_code, receive


def stream_id(fake: FakeSidecar) -> str:
    return fake.frames[0][0]["stream"]


def run(tmp_path, query: str, messages: list[bytes]) -> tuple[FakeSidecar, dict, list]:
    fake = FakeSidecar()
    with dictation_client(tmp_path, fake) as client, client.websocket_connect(f"/v1/dictation?{query}") as ws:
        ready = receive(ws)
        for message in messages:
            ws.send_bytes(message)
        ws.send_json({"type": "end"})
        events = []
        while True:
            event = receive(ws)
            events.append(event)
            if event["type"] == "closed":
                break
    return fake, ready, events


@pytest.mark.parametrize(("encoding", "encode"), [("mulaw", mulaw_encode), ("alaw", alaw_encode)])
def test_g711_defaults_to_8khz_and_reaches_the_recognizer_at_16khz(tmp_path, encoding, encode):
    audio = encode(tone(1.0, 8000))
    fake, ready, events = run(tmp_path, f"encoding={encoding}", [audio[:3000], audio[3000:]])
    assert (ready["encoding"], ready["sample_rate"]) == (encoding, 8000)
    assert len(fake.audio_sent(stream_id(fake))) == 16000
    assert events == [{"type": "closed", "utterances": 0, "audio_s": 1.0}]


@pytest.mark.parametrize("encoding", ["webm", "ogg"])
def test_a_container_stream_in_odd_chunks_reaches_the_recognizer(tmp_path, encoding):
    data = ffmpeg_file(encoding, "libopus", tone(1.0, 48000), 48000)
    chunks = [data[i:i + 777] for i in range(0, len(data), 777)]
    fake, ready, events = run(tmp_path, f"encoding={encoding}", chunks)
    assert (ready["encoding"], ready["sample_rate"]) == (encoding, 48000)  # the stream's own rate
    assert len(fake.audio_sent(stream_id(fake))) == (51 * 960 - 312) // 3
    assert events == [{"type": "closed", "utterances": 0, "audio_s": 1.014}]


def test_raw_opus_packets_one_per_message(tmp_path):
    packets = opus_packets(tone(1.0, 16000), 16000)
    fake, ready, _ = run(tmp_path, "encoding=opus", packets)
    assert (ready["encoding"], ready["sample_rate"]) == ("opus", 16000)
    assert len(fake.audio_sent(stream_id(fake))) == len(packets) * 320


def test_a_bad_opus_packet_is_dropped_and_the_stream_goes_on(tmp_path):
    packets = opus_packets(tone(0.2, 16000), 16000)
    fake, _, events = run(tmp_path, "encoding=opus", [packets[0], b"\xff\xff\xff", *packets[1:]])
    assert events[0] == {"type": "error", "code": "bad_audio", "retryable": False,
                         "message": "an Opus packet does not decode: Invalid data found when processing input; "
                                    "the message was dropped"}
    assert events[-1]["type"] == "closed"
    assert len(fake.audio_sent(stream_id(fake))) == len(packets) * 320


def test_opus_at_a_rate_opus_does_not_have_is_refused(tmp_path):
    with dictation_client(tmp_path) as client, \
            client.websocket_connect("/v1/dictation?encoding=opus&sample_rate=44100") as ws:
        message = "sample_rate: '44100' must be one of 8000, 12000, 16000, 24000, 48000 for Opus"
        assert receive(ws) == {"type": "error", "code": "bad_request", "retryable": False, "message": message}
        assert close_code(ws) == (4400, message)


@pytest.mark.parametrize(("encoding", "data", "reason"), [
    ("webm", b"\x00garbage" * 100, "not a WebM stream (no EBML header at its start)"),
    ("ogg", b"RIFF" + bytes(100), "not an Ogg stream at byte 0 (no 'OggS' page)"),
    ("webm", ffmpeg_video_only("matroska"), "the stream has no audio track (found: video V_MPEG4/ISO/ASP)"),
])
def test_a_container_stream_that_cannot_be_read_gets_bad_audio_then_4400(tmp_path, encoding, data, reason):
    message = f"{reason}; the {encoding} stream cannot be read past this point"
    with dictation_client(tmp_path) as client, \
            client.websocket_connect(f"/v1/dictation?encoding={encoding}") as ws:
        receive(ws)
        ws.send_bytes(data)
        assert receive(ws) == {"type": "error", "code": "bad_audio", "retryable": False, "message": message}
        assert close_code(ws) == (4400, message[:123])


def test_a_corrupt_page_mid_stream_ends_an_ogg_session(tmp_path):
    data = bytearray(ffmpeg_file("ogg", "libopus", tone(1.0, 48000), 48000))
    data[len(data) // 2] ^= 0xFF
    with dictation_client(tmp_path) as client, client.websocket_connect("/v1/dictation?encoding=ogg") as ws:
        receive(ws)
        ws.send_bytes(bytes(data))
        error = receive(ws)
        assert error["code"] == "bad_audio"
        assert error["message"].endswith("fails its checksum (corrupt stream); the ogg stream cannot be read past "
                                         "this point")
        assert close_code(ws)[0] == 4400


def test_a_stream_cut_inside_a_page_is_reported_and_still_ends_normally(tmp_path):
    data = ffmpeg_file("ogg", "libopus", tone(1.0, 48000), 48000)
    fake, _, events = run(tmp_path, "encoding=ogg", [data[:-100]])
    assert [e["type"] for e in events] == ["error", "closed"]
    assert events[0]["code"] == "bad_audio"
    assert events[0]["message"].startswith("the Ogg stream ended inside a page (")
    assert events[0]["message"].endswith(" bytes of it were dropped); the end of the stream was dropped")
    assert len(fake.audio_sent(stream_id(fake))) > 0
