"""The TTS routes in every output format, with the fake engine: the /v1/tts
socket (Ogg Opus pages, G.711), POST /v1/tts, and POST /v1/audio/speech
through the official ``openai`` client against a real server on 127.0.0.1.
Output is checked with decoders other than FFmpeg wherever one exists."""

from __future__ import annotations

import httpx
import numpy as np
import openai
import pytest
from starlette.testclient import TestClient

from gateway.codecs.encoders import audio_encoder
from gateway.codecs.formats import HTTP_OUTPUTS, OPENAI_OUTPUTS, OutputFormat
from gateway.codecs.ogg import OggReader
from tests.gateway.codecs.test_encoders import SLACK_S, independent_decode
from tests.gateway.fakes import FRAME, RATE, FakeTtsEngine, frames_for
from tests.gateway.helpers import LOOPBACK, tts_app
from tests.gateway.tts.test_socket import read_utterance
from tests.support.net import running_server
from tests.support.sockets import receive

TEXT = "Compressed speech for every client out there."  # 11 fake frames: 0.88 s
SECONDS = frames_for(TEXT) * FRAME / RATE


def check_decodes(fmt: OutputFormat, data: bytes, rate: int) -> None:
    decoded, got_rate = independent_decode(fmt, data, rate)
    assert got_rate == rate
    assert 0 <= len(decoded) / rate - SECONDS <= SLACK_S.get(fmt, 0.0) + 0.002  # + resampler rounding
    assert np.sqrt(np.mean(decoded ** 2)) > 0.03  # the fake's noise at 0.1 RMS, not silence


def test_socket_opus_sends_whole_ogg_pages_one_message_per_frame(tmp_path):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client, \
            client.websocket_connect("/v1/tts?encoding=opus") as ws:
        ready = receive(ws)
        assert (ready["encoding"], ready["sample_rate"]) == ("opus", 24000)
        ws.send_json({"type": "speak", "text": TEXT})
        _, messages, end = read_utterance(ws)
    assert len(messages) == frames_for(TEXT) + 1  # a page per frame, then the end-of-stream page
    assert end["frames"] == len(messages)
    assert end["audio_s"] == pytest.approx(SECONDS, abs=0.021)  # whole 20 ms packets
    reader = OggReader()
    first = list(reader.feed(messages[0]))
    assert [p.data[:8] for p in first[:2]] == [b"OpusHead", b"OpusTags"] and len(first) == 2 + 4
    for message in messages[1:]:
        assert len(list(reader.feed(message))) >= 1 and reader.pending_bytes == 0  # whole pages only
    check_decodes(OutputFormat.OPUS, b"".join(messages), 24000)


def test_each_socket_utterance_is_a_complete_ogg_stream(tmp_path):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client, \
            client.websocket_connect("/v1/tts?encoding=opus&sample_rate=16000") as ws:
        assert receive(ws)["sample_rate"] == 16000
        ws.send_json({"type": "speak", "text": TEXT})
        ws.send_json({"type": "speak", "text": TEXT})
        streams = [b"".join(read_utterance(ws)[1]) for _ in range(2)]
    for data in streams:
        check_decodes(OutputFormat.OPUS, data, 16000)


@pytest.mark.parametrize("encoding", ["mulaw", "alaw"])
def test_socket_g711_is_8khz_by_default(tmp_path, encoding):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client, \
            client.websocket_connect(f"/v1/tts?encoding={encoding}") as ws:
        ready = receive(ws)
        assert (ready["encoding"], ready["sample_rate"]) == (encoding, 8000)
        ws.send_json({"type": "speak", "text": TEXT})
        _, messages, _ = read_utterance(ws)
    assert all(len(m) <= 800 for m in messages)  # at most 100 ms a message
    check_decodes(OutputFormat(encoding), b"".join(messages), 8000)


@pytest.mark.parametrize("fmt", HTTP_OUTPUTS)
def test_post_tts_in_every_format(tmp_path, fmt):
    with TestClient(tts_app(tmp_path), client=LOOPBACK) as client:
        r = client.post("/v1/tts", json={"text": TEXT, "format": fmt.value})
    rate = fmt.default_rate(RATE)
    assert r.status_code == 200
    assert (r.headers["x-encoding"], r.headers["x-sample-rate"]) == (fmt.value, str(rate))
    media = f"audio/pcm;rate={rate};encoding={fmt.value}" if fmt.value.startswith("pcm") else fmt.media_type
    assert r.headers["content-type"] == media
    check_decodes(fmt, r.content, rate)


@pytest.mark.parametrize("response_format", list(OPENAI_OUTPUTS))
async def test_the_openai_client_in_every_response_format(tmp_path, response_format):
    fmt = OPENAI_OUTPUTS[response_format]
    async with running_server(tts_app(tmp_path)) as url:
        oa = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="not-needed-on-loopback", max_retries=0)
        async with oa.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=TEXT, response_format=response_format) as response:
            data = b"".join([chunk async for chunk in response.iter_bytes()])
        await oa.close()
    check_decodes(fmt, data, 24000)


@pytest.mark.parametrize("response_format", ["mp3", "opus", "aac", "flac"])
async def test_first_audio_bytes_leave_before_synthesis_ends(tmp_path, response_format):
    """Bytes beyond the format's header reach the client while the engine is
    still early in the text: each encoded piece is sent as it is made."""
    fmt = OPENAI_OUTPUTS[response_format]
    header = len(audio_encoder(fmt, 24000).start())
    engine = FakeTtsEngine(frame_delay_s=0.05)
    text = "A long sentence, so that the engine is still speaking when the first bytes leave. " * 2
    total = frames_for(text)
    received_early = 0
    async with running_server(tts_app(tmp_path, engine)) as url, httpx.AsyncClient() as http:
        body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": response_format}
        async with http.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=30) as response:
            assert response.status_code == 200
            chunks = []
            async for chunk in response.aiter_raw():
                if engine.frames_produced < total // 2:
                    received_early += len(chunk)
                chunks.append(chunk)
    assert received_early > header  # audio, not only the header, before half the text was spoken
    assert engine.frames_produced == total
    decoded, _ = independent_decode(fmt, b"".join(chunks), 24000)
    assert len(decoded) >= total * FRAME
