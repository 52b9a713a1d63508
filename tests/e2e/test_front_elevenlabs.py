"""The ElevenLabs front end to end with the real clients: ElevenLabs' own SDK
(its realtime socket, over TLS as it insists, and its HTTP stream), Pipecat's
``ElevenLabsTTSService`` in a minimal pipeline and LiveKit's ``elevenlabs``
plugin, against a real uvicorn on 127.0.0.1 running the real Pocket engine on
a random-weight checkpoint. Barge-in: close_context stops the engine stream
within one frame and frees its batch slot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess

import httpx
import numpy as np
import pytest
import uvicorn
import websockets

from tests.e2e.tiny_pocket import pocket_app, serving_pocket, wait_healthy
from tests.support.net import free_port, serving

# Pipecat imports the standard library's audioop, which warns on Python 3.11+, and
# warns about its own deprecated classes when it defines them
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore:'audioop' is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:`AudioContextTTSService` is deprecated:DeprecationWarning")]

TEXT = "Hello there. This is a small test of the front."
WORDS = ["Hello", "there.", "This", "is", "a", "small", "test", "of", "the", "front."]


@pytest.fixture
async def gateway(model_dir, tmp_path):
    async with serving_pocket(model_dir, tmp_path) as served:
        yield served


# ---- ElevenLabs' SDK


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (and its key), made by openssl."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
async def tls_gateway(model_dir, tmp_path, monkeypatch, certificate):
    """The gateway behind uvicorn's TLS: the SDK's realtime client always dials wss://.
    Its certificate is trusted through SSL_CERT_FILE."""
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    app, _ = pocket_app(model_dir, tmp_path)
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="on",
                            ws_ping_interval=None, ssl_certfile=str(cert), ssl_keyfile=str(key))
    async with serving(config) as server:
        url = f"https://127.0.0.1:{server.config.port}"
        await wait_healthy(url, verify=ssl.create_default_context(cafile=str(cert)))
        yield url


# the SDK reads ConnectionClosed.code, which websockets deprecated, when the stream ends
@pytest.mark.filterwarnings("ignore:ConnectionClosed.code is deprecated:DeprecationWarning")
async def test_sdk_realtime_socket_speaks_streamed_text(tls_gateway):
    from elevenlabs.client import ElevenLabs

    def run() -> bytes:  # the SDK's realtime client is synchronous
        client = ElevenLabs(api_key="unused-on-loopback", base_url=tls_gateway)
        chunks = client.text_to_speech.convert_realtime(
            voice_id="21m00Tcm4TlvDq8ikWAM", text=iter(["Hello there, ", "this is streamed ", "text."]),
            model_id="eleven_flash_v2_5", output_format="pcm_24000")
        return b"".join(chunks)

    audio = await asyncio.to_thread(run)
    seconds = len(audio) / 2 / 24000
    assert seconds > 0.5 and np.abs(np.frombuffer(audio, "<i2")).max() > 0  # real audio, at 24 kHz


async def test_sdk_http_stream_and_convert(gateway):
    from elevenlabs.client import AsyncElevenLabs

    url, _ = gateway
    async with httpx.AsyncClient(timeout=60) as http:
        client = AsyncElevenLabs(api_key="unused-on-loopback", base_url=url, httpx_client=http)
        streamed = b"".join([chunk async for chunk in client.text_to_speech.stream(
            voice_id="21m00Tcm4TlvDq8ikWAM", text=TEXT, model_id="eleven_flash_v2_5", output_format="pcm_16000",
            seed=3)])
        converted = b"".join([chunk async for chunk in client.text_to_speech.convert(
            voice_id="21m00Tcm4TlvDq8ikWAM", text=TEXT, model_id="eleven_flash_v2_5", output_format="pcm_16000",
            seed=3)])
    a, b = (np.frombuffer(x, "<i2").astype(np.float32) / 32768 for x in (streamed, converted))
    # the same seed gives the same audio (to rounding: the batch may cut decodes differently)
    assert len(a) / 16000 > 0.5 and len(a) == len(b) and np.max(np.abs(a - b)) < 1e-3


# ---- Pipecat


async def test_pipecat_elevenlabs_tts_service_speaks_and_times_every_word(gateway):
    from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame, TTSTextFrame
    from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

    from tests.support.pipecat_run import run_pipeline

    url, _ = gateway
    tts = ElevenLabsTTSService(api_key="unused", url=url.replace("http", "ws", 1), sample_rate=16000,
                               settings=ElevenLabsTTSService.Settings(voice="alba", model="eleven_flash_v2_5"))
    frames = await run_pipeline([tts], [TTSSpeakFrame(TEXT)], audio_out_sample_rate=16000)
    audio = [f for f in frames if isinstance(f, TTSAudioRawFrame)]
    assert not [f for f in frames if isinstance(f, ErrorFrame)]
    assert sum(len(f.audio) for f in audio) / 2 / 16000 > 0.5 and {f.sample_rate for f in audio} == {16000}
    # the words come back from the alignment, in order, each once
    assert [f.text for f in frames if isinstance(f, TTSTextFrame)] == WORDS
    assert sum(isinstance(f, TTSStoppedFrame) for f in frames) == 1  # isFinal ended the context


# ---- LiveKit


async def test_livekit_elevenlabs_plugin_streams_and_synthesizes(gateway):
    from livekit.agents.utils import http_context
    from livekit.plugins import elevenlabs

    url, _ = gateway
    async with http_context.open():
        tts = elevenlabs.TTS(api_key="unused", voice_id="alba", base_url=url + "/v1", encoding="pcm_16000")
        try:
            stream = tts.stream()
            for word in TEXT.split(" "):
                stream.push_text(word + " ")
            stream.end_input()
            streamed = [event async for event in stream]
            synthesized = [event async for event in tts.synthesize("Over plain HTTP.")]
        finally:
            await tts.aclose()
    seconds = sum(e.frame.samples_per_channel for e in streamed) / 16000
    assert seconds > 0.5 and {e.frame.sample_rate for e in streamed} == {16000}
    assert sum(e.frame.samples_per_channel for e in synthesized) / 16000 > 0.2


# ---- barge-in with the real engine


async def test_close_context_stops_the_engine_within_one_step_and_frees_its_batch_slot(gateway, monkeypatch):
    from engines.pocket.scheduled_stream import ScheduledStream

    url, engine = gateway
    scheduler = engine._scheduler  # the engine's batch scheduler: (running, waiting) streams
    at_cancel: dict[int, int] = {}  # stream -> frames it had delivered when it was cancelled
    cancel = ScheduledStream.cancel

    def recording_cancel(stream: ScheduledStream) -> None:
        at_cancel.setdefault(id(stream), stream.delivered)
        cancel(stream)

    monkeypatch.setattr(ScheduledStream, "cancel", recording_cancel)
    streams: list[ScheduledStream] = []
    submit = scheduler.submit
    monkeypatch.setattr(scheduler, "submit", lambda *a, **k: streams.append(submit(*a, **k)) or streams[-1])
    long_text = " ".join(["This sentence keeps going so that there is plenty to interrupt."] * 4)
    ws_url = url.replace("http", "ws", 1) + "/v1/text-to-speech/alba/multi-stream-input?output_format=pcm_24000"
    async with websockets.connect(ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"text": " ", "context_id": "turn1"}))
        await ws.send(json.dumps({"text": long_text + " ", "context_id": "turn1"}))  # not flushed: barge-in stops it
        received = 0
        while received < 3:
            received += bool(json.loads(await asyncio.wait_for(ws.recv(), 60)).get("audio"))
        assert scheduler.load() == (1, 0)
        await ws.send(json.dumps({"context_id": "turn1", "close_context": True}))
        while not json.loads(await asyncio.wait_for(ws.recv(), 60)).get("isFinal"):
            pass
        for _ in range(250):  # the worker drops a cancelled stream at its next step
            if scheduler.load() == (0, 0):
                break
            await asyncio.sleep(0.02)
        assert scheduler.load() == (0, 0)  # the batch slot is free
        await ws.send(json.dumps({"close_socket": True}))
        with contextlib.suppress(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
    (stream,) = streams  # the first sentence: the one being spoken when the user barged in
    assert stream.cancelled and id(stream) in at_cancel
    # after the cancel the worker finished at most the step it was in (one decode's frames)
    assert stream.delivered - at_cancel[id(stream)] <= scheduler.decode_chunk
