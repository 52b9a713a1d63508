"""End to end: the real Pocket engine on a tiny random-weight checkpoint, behind a
real uvicorn on 127.0.0.1, driven by the Python client."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from engines.base import SynthesisOptions
from gateway.audio import Encoding, encode, read_wav
from gateway.client.tts import TtsClient
from tests.e2e.tiny_pocket import serving_pocket

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
async def gateway(model_dir, tmp_path):
    async with serving_pocket(model_dir, tmp_path, max_tts_sessions_per_client=8) as served:  # eight sockets from here
        yield served


def assert_same_s16(ours: bytes, theirs: bytes) -> None:
    """The same 16-bit audio, sample for sample, up to one step of rounding: the
    scheduler's Mimi decoder takes one frame or several per call depending on how
    busy the machine is, and a different call shape can round a sample the other way."""
    a, b = np.frombuffer(ours, "<i2").astype(np.int32), np.frombuffer(theirs, "<i2").astype(np.int32)
    assert len(a) == len(b)
    assert int(np.max(np.abs(a - b), initial=0)) <= 1


async def engine_pcm(engine, text: str, seed: int, voice: str | None = None) -> np.ndarray:
    stream = engine.open_stream(text, voice, SynthesisOptions(seed=seed))
    return np.concatenate([frame async for frame in stream.frames()])


async def test_socket_pcm_equals_the_engine_output_for_the_same_seed(gateway):
    url, engine = gateway
    text = "The quick brown fox jumps over the lazy dog."
    async with await TtsClient.connect(url) as tts:
        assert (tts.ready["engine"], tts.ready["voice"], tts.ready["frame_samples"]) == ("pocket", "alba", 1920)
        utt = await tts.synthesize(text, seed=42)
        closed = await tts.close()
    direct = await engine_pcm(engine, text, seed=42)
    assert_same_s16(utt.audio, encode(direct, Encoding.S16LE))
    assert utt.frames == len(direct) // 1920 and all(len(f) for f in [utt.audio])
    assert utt.end["frames"] == utt.frames and utt.end["audio_s"] == round(len(direct) / 24000, 3)
    assert utt.end["rtf"] > 0 and utt.end["ttfa_ms"] >= 0
    assert closed == {"type": "closed", "utterances": 1, "audio_s": round(len(direct) / 24000, 3)}
    assert np.sqrt(np.mean(direct ** 2)) > 1e-3  # real audio, not silence


async def test_resampled_socket_output_rate_and_length(gateway):
    url, engine = gateway
    text = "Resampled to sixteen kilohertz."
    async with await TtsClient.connect(url, sample_rate=16000, encoding="pcm_f32le") as tts:
        assert tts.ready["sample_rate"] == 16000
        utt = await tts.synthesize(text, seed=7)
    direct = await engine_pcm(engine, text, seed=7)
    assert len(utt.audio) // 4 == round(len(direct) * 16000 / 24000)


async def test_cancel_mid_utterance_with_the_real_engine(gateway):
    url, engine = gateway
    long_text = " ".join(["This sentence keeps going so that there is plenty to cancel."] * 6)
    async with await TtsClient.connect(url) as tts:
        await tts.speak(long_text, id="long", seed=1)
        assert (await tts.receive(30))["type"] == "start"
        frames = 0
        while frames < 3:
            frames += isinstance(await tts.receive(30), bytes)
        await tts.cancel()
        while True:
            message = await tts.receive(30)
            if isinstance(message, dict):
                break
            frames += 1
        assert message == {"type": "cancelled", "id": "long", "frames_sent": frames}
        utt = await tts.synthesize("And now something short.", seed=2)
        assert utt.id == "u2" and utt.frames > 0
    full = await engine_pcm(engine, long_text, seed=1)
    assert frames < len(full) // 1920


async def test_incremental_text_with_the_real_engine(gateway):
    url, _ = gateway
    async with await TtsClient.connect(url) as tts:
        await tts.text("Streaming tokens ")
        await tts.text("make a sentence. Then more")
        start = await tts.receive(30)  # arrives before the rest of the turn is sent
        assert start == {"type": "start", "id": "u1", "text": "Streaming tokens make a sentence."}
        assert isinstance(await tts.receive(30), bytes)
        await tts.text(" text follows.")
        await tts.flush()
        first = await tts.collect(60)
        second = await tts.collect(60)
        assert (first.end["id"], second.start["text"]) == ("u1", "Then more text follows.")


async def test_eight_concurrent_sockets_share_batched_steps(gateway):
    url, engine = gateway
    texts = [f"Speaker {i} reads sentence number {i} aloud." for i in range(8)]
    scheduler = engine._scheduler  # the engine's batch scheduler counts its forwards
    steps0, rows0 = scheduler.steps, scheduler.rows_stepped

    async def one(i: int):
        async with await TtsClient.connect(url) as tts:
            utt = await tts.synthesize(texts[i], seed=10 + i)
            await tts.close()
            return utt

    utts = await asyncio.gather(*(one(i) for i in range(8)))
    steps, rows = scheduler.steps - steps0, scheduler.rows_stepped - rows0
    assert rows > steps  # several streams per forward pass
    for i, utt in enumerate(utts):
        direct = await engine_pcm(engine, texts[i], seed=10 + i)
        got = np.frombuffer(utt.audio, dtype="<i2").astype(np.float32) / 32767
        assert utt.end["type"] == "end" and len(got) == len(direct), f"socket {i}: incomplete audio"
        assert np.max(np.abs(got - np.clip(direct, -1, 1))) < 1e-3, f"socket {i}: wrong audio"


async def test_http_wav_equals_the_socket_audio(gateway):
    url, _ = gateway
    text = "Over plain HTTP."
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        r = await http.post("/v1/tts", json={"text": text, "seed": 5})
    assert r.status_code == 200
    samples, rate = read_wav(r.content)
    async with await TtsClient.connect(url) as tts:
        utt = await tts.synthesize(text, seed=5)
    assert rate == 24000
    assert_same_s16(encode(samples, Encoding.S16LE), utt.audio)
