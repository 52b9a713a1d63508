"""A final's words depend on the audio alone, not on the load: the same clips give
the same finals streamed one at a time in real time, and all at once as fast as
the socket takes them (a real `voxgate serve` with the default decode lanes,
real speech with white noise, where the audio after the speech is not silence).

Under load a final is dispatched later (or only after the utterance closed) and
may share a batch with other streams' finals; it must still decode the very same
samples on the very same encoder window. ``interim=false``: no partials, so no
stable words, so each final is exactly its own decode of the utterance. Both
final windows are tried: eager streams decode finals on the short window, the
others on Whisper's 30 s one.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.dictation_clips import QUICK_PHRASES, make_quick_clip
from gateway.client.dictation import DictationClient
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import wer

pytestmark = pytest.mark.slow

SNR_DB = 10.0
# (phrases, rate) of clips whose words tiny.en changes when the decoded audio runs
# 70 ms or 370 ms further into the noise, or the encoder window is a second longer:
# what a final taken late, or batched with a longer one, used to get
SENSITIVE = ((0, 1.0), (13, 1.0), (18, 1.0), (19, 1.0), (3, 1.25), (12, 1.25))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # every clip of a run at once, from this one client address
    with running_gateway(tmp_path_factory.mktemp("data"), "asr",
                         env={"VOXGATE_MAX_DICTATION_STREAMS_PER_CLIENT": "8"}) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def clips():
    return [make_quick_clip(QUICK_PHRASES[n], rate, n, SNR_DB, steady=True) for n, rate in SENSITIVE]


async def finals(url: str, clip, realtime: bool, eager: bool) -> list[str]:
    async with await DictationClient.connect(url, interim=False, eager=eager) as client:
        async def send() -> None:
            await client.stream_samples(clip.audio, realtime=realtime)
            await client.end()

        sender = asyncio.create_task(send())
        texts = [e["text"] async for e in client.events() if e["type"] == "final"]
        await sender
    return texts


@pytest.mark.parametrize("eager", [True, False], ids=["short-window", "full-window"])
async def test_the_same_clips_give_the_same_finals_alone_in_real_time_and_all_at_once(server, clips, eager):
    alone = [await finals(server, clip, True, eager) for clip in clips]
    together = await asyncio.gather(*(finals(server, clip, False, eager) for clip in clips))
    assert together == alone
    for clip, texts in zip(clips, alone, strict=True):
        assert len(texts) == 1 and wer(clip.text, texts[0]) <= 0.4, (clip.text, texts)
