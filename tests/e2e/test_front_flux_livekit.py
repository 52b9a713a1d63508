"""LiveKit Agents' Deepgram plugin, its Flux stream (``STTv2``, which needs no
LiveKit server), against /v2/listen of a real `voxgate serve`: the ASR sidecar
with tiny.en hears steady Piper speech; LiveKit's events per turn and their
exact words."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.e2e.flux_support import (
    FIRST,
    KEY,
    SECOND,
    gateway_server,  # noqa: F401  (the `server` fixture)
    speech,
    words_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
deepgram = pytest.importorskip("livekit.plugins.deepgram",
                               reason="livekit-plugins-deepgram is not installed (pip install 'voxgate[test]')")
if not hasattr(deepgram, "STTv2"):
    pytest.skip("this livekit-plugins-deepgram has no Flux stream (STTv2)", allow_module_level=True)

from livekit import rtc  # noqa: E402  (after the importorskip above)
from livekit.agents import stt as lk_stt  # noqa: E402

CHUNK = 640  # 20 ms of 16-bit mono at 16 kHz, as a LiveKit room delivers it
LETTERS = {"START_OF_SPEECH": "S", "PREFLIGHT_TRANSCRIPT": "P", "FINAL_TRANSCRIPT": "F", "END_OF_SPEECH": "E"}


@pytest.fixture
async def http():
    import aiohttp

    async with aiohttp.ClientSession() as session:
        yield session


async def push_realtime(stream, pcm: bytes) -> None:
    start = time.monotonic()
    for i in range(0, len(pcm) - CHUNK + 1, CHUNK):
        stream.push_frame(rtc.AudioFrame(pcm[i:i + CHUNK], 16000, 1, CHUNK // 2))
        await asyncio.sleep(max(0.0, start + (i + CHUNK) / 32000 - time.monotonic()))


async def read_all(stream) -> list:
    return [event async for event in stream]


async def test_flux_stream_gives_each_turn_start_preflight_final_and_end_with_exact_words(server, http):
    # a 2 s end-of-turn silence leaves the speculative final ample time: a preflight comes every turn
    stt = deepgram.STTv2(api_key=KEY, base_url=server + "/v2/listen", http_session=http, eager_eot_threshold=0.5,
                         eot_threshold=1.0, eot_timeout_ms=2000)
    stream = stt.stream()
    reader = asyncio.create_task(read_all(stream))
    await push_realtime(stream, speech(FIRST, SECOND, tail_s=2.5))
    stream.end_input()  # CloseStream; the stream ends when the socket does
    events = await asyncio.wait_for(reader, 60)
    await stt.aclose()
    letters = "".join(LETTERS.get(e.type.name, "") for e in events)
    # a preflight (EagerEndOfTurn) may be withdrawn by an interim (TurnResumed) and come again
    assert re.fullmatch(r"(SP+FE){2}", letters), letters
    finals = [e.alternatives[0] for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert [words_of(f.text) for f in finals] == [words_of(FIRST), words_of(SECOND)]
    for final in finals:
        assert " ".join(final.words) == final.text and 0 < final.start_time < final.end_time
    assert finals[0].end_time < finals[1].start_time
    kinds = [e.type for e in events]
    for i in (i for i, kind in enumerate(kinds) if kind == lk_stt.SpeechEventType.FINAL_TRANSCRIPT):
        preflight = events[max(j for j in range(i) if kinds[j] == lk_stt.SpeechEventType.PREFLIGHT_TRANSCRIPT)]
        assert preflight.alternatives[0].text == events[i].alternatives[0].text
    assert lk_stt.SpeechEventType.INTERIM_TRANSCRIPT in kinds  # Updates carry their words
