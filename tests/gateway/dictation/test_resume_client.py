"""The real client resuming through a cutting relay against the real app on a
real uvicorn, with a fake sidecar: the recognizer gets every sample of the
client's audio exactly once, in order, and the client every event exactly once."""

from __future__ import annotations

import asyncio

import numpy as np

from gateway.client.dictation import DictationClient
from tests.gateway.helpers import make_app
from tests.support.cut_relay import CutRelay
from tests.support.fake_sidecar import FakeSidecar
from tests.support.net import running_server
from tests.support.waiting import eventually

CHUNK = 1600  # 100 ms at 16 kHz
SPEECH = {"ev": "speech_started", "utterance": 0, "at": 0.5, "start_sample": 8000}


def partial(text: str) -> dict:
    return {"ev": "partial", "utterance": 0, "text": text, "stable": "", "start": 0.5, "end": 1.0, "lag_s": 0.0}


async def next_event(events) -> dict:
    return await asyncio.wait_for(events.__anext__(), 60)


async def test_a_cut_loses_no_sample_and_repeats_none(tmp_path):
    fake = FakeSidecar()
    app = make_app(tmp_path, asr=fake)
    audio = (np.arange(48000) % 300 - 150).astype("<i2")  # 3 s
    async with running_server(app) as url:
        relay = CutRelay("127.0.0.1", int(url.rsplit(":", 1)[1]))
        await relay.start()
        try:
            client = await DictationClient.connect(relay.url, resume=True, ping_s=1.0)
            async with client:
                events = client.events()
                stream = fake.the_stream()
                for start in range(0, 16000, CHUNK):
                    await client.send_audio(audio[start:start + CHUNK].tobytes())
                await eventually(lambda: len(fake.audio_sent(stream.id)) == 16000, "the first second arrived")
                fake.play(SPEECH)
                assert (await next_event(events))["seq"] == 1
                cut = asyncio.create_task(relay.cut(0.5))
                await eventually(lambda: not relay.pipes, "the path is cut")
                fake.play(partial("said while away"))  # lost in flight or held: either way it comes once
                for start in range(16000, 48000, CHUNK):  # the first sends after the cut go nowhere
                    await client.send_audio(audio[start:start + CHUNK].tobytes())
                await cut
                assert await next_event(events) == {"type": "partial", "utterance": 0, "text": "said while away",
                                                    "stable": "", "start": 0.5, "end": 1.0, "lag_s": 0.0, "seq": 2}
                await client.end()
                assert await next_event(events) == {"type": "closed", "utterances": 0, "audio_s": 3.0, "seq": 3}
        finally:
            await relay.aclose()
    assert client.resumes == 1 and relay.connections == 2
    np.testing.assert_array_equal(fake.audio_sent(stream.id), audio.astype(np.float32) / 32768)
