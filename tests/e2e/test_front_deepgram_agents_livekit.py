"""LiveKit Agents' Deepgram plugin (STT and TTS streams, which need no LiveKit
server) against the Deepgram front of a real `voxgate serve`: the ASR sidecar
with tiny.en hears Piper speech, Piper speaks and what LiveKit got is transcribed back."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.e2e.deepgram_agents_support import (
    FIRST,
    IDLE_TIMEOUT_S,
    KEY,
    MAX_WORD_ERRORS,
    SECOND,
    gateway_server,  # noqa: F401  (the `server` fixture)
    speech,
    transcribe,
    word_errors,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
deepgram = pytest.importorskip("livekit.plugins.deepgram",
                               reason="livekit-plugins-deepgram is not installed (pip install 'voxgate[test]')")

from livekit import rtc  # noqa: E402  (after the importorskip above)
from livekit.agents import stt as lk_stt  # noqa: E402

CHUNK = 640  # 20 ms of 16-bit mono at 16 kHz, as a LiveKit room delivers it


@pytest.fixture
async def http():
    import aiohttp

    async with aiohttp.ClientSession() as session:
        yield session


async def push_realtime(stream, pcm: bytes) -> None:
    start = time.monotonic()
    for i in range(0, len(pcm), CHUNK):
        stream.push_frame(rtc.AudioFrame(pcm[i:i + CHUNK], 16000, 1, CHUNK // 2))
        delay = start + (i + CHUNK) / 32000 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


async def read_all(stream) -> list:
    return [event async for event in stream]


def kinds(events: list) -> list[str]:
    skip = (lk_stt.SpeechEventType.INTERIM_TRANSCRIPT, lk_stt.SpeechEventType.RECOGNITION_USAGE)
    return [e.type.name for e in events if e.type not in skip]


async def test_stt_stream_gives_a_final_and_end_of_speech_per_utterance(server, http):
    stt = deepgram.STT(api_key=KEY, base_url=server + "/v1/listen", http_session=http)
    stream = stt.stream()
    reader = asyncio.create_task(read_all(stream))
    await push_realtime(stream, speech(FIRST, SECOND, multiple_of=CHUNK))
    stream.end_input()  # Finalize, then CloseStream; the stream ends when the socket does
    events = await asyncio.wait_for(reader, 60)
    await stt.aclose()
    assert kinds(events) == ["START_OF_SPEECH", "FINAL_TRANSCRIPT", "END_OF_SPEECH"] * 2
    finals = [e.alternatives[0] for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    for want, got in zip([FIRST, SECOND], finals, strict=True):
        assert word_errors(want, got.text) <= MAX_WORD_ERRORS, got.text
        # punctuate=true: LiveKit reads punctuated_word, which must spell the transcript
        assert " ".join(got.words) == got.text
        assert 0 < got.start_time < got.end_time
    assert finals[0].end_time < finals[1].start_time
    assert any(e.type == lk_stt.SpeechEventType.INTERIM_TRANSCRIPT for e in events)


async def test_stt_stream_flush_finalizes_the_open_utterance(server, http):
    """``flush()`` sends Finalize: the utterance still open (no trailing silence) becomes a final at once."""
    stt = deepgram.STT(api_key=KEY, base_url=server + "/v1/listen", http_session=http, endpointing_ms=3000)
    stream = stt.stream()
    reader = asyncio.create_task(read_all(stream))
    await push_realtime(stream, speech(FIRST, tail_s=0.1, multiple_of=CHUNK))
    stream.flush()
    stream.end_input()
    events = await asyncio.wait_for(reader, 60)
    await stt.aclose()
    finals = [e.alternatives[0].text for e in events if e.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert len(finals) == 1 and word_errors(FIRST, finals[0]) <= MAX_WORD_ERRORS
    # the final answered Finalize (from_finalize, never speech_final): LiveKit sees no END_OF_SPEECH
    assert kinds(events) == ["START_OF_SPEECH", "FINAL_TRANSCRIPT"]


async def speak(tts, text: str) -> tuple[list, bool]:
    stream = tts.stream()
    for word in text.split():
        stream.push_text(word + " ")  # LiveKit sends one Speak per word, then Flush at the end
    stream.end_input()
    events = await asyncio.wait_for(read_all(stream), 60)
    await stream.aclose()
    return events, stream._connection_reused


def pcm_of(events: list) -> bytes:
    return b"".join(e.frame.data.tobytes() for e in events)


async def test_tts_streams_one_after_another_reuse_the_socket(server, http):
    texts = ("Hello there, this is a test.", "And here is a second answer.")
    tts = deepgram.TTS(api_key=KEY, base_url=server + "/v1/speak", http_session=http, sample_rate=24000)
    first, first_reused = await speak(tts, texts[0])
    second, second_reused = await speak(tts, texts[1])
    await tts.aclose()  # Flush and Close on the pooled socket
    # the pooled socket stays open after Flushed and speaks the next answer to its own Flushed
    assert (first_reused, second_reused) == (False, True)
    for text, events in zip(texts, (first, second), strict=True):
        assert [e.is_final for e in events][-1] is True  # ended by its Flushed
        assert len({e.segment_id for e in events}) == 1
        assert {(e.frame.sample_rate, e.frame.num_channels) for e in events} == {(24000, 1)}
        assert word_errors(text, await transcribe(server, pcm_of(events), 24000)) <= MAX_WORD_ERRORS


async def test_tts_pooled_socket_outlasts_a_pause_longer_than_the_idle_timeout(server, http):
    """LiveKit keeps its pooled /v1/speak socket between answers without a keepalive, as Deepgram allows."""
    tts = deepgram.TTS(api_key=KEY, base_url=server + "/v1/speak", http_session=http, sample_rate=24000)
    await speak(tts, "First answer.")
    await asyncio.sleep(2.5 * IDLE_TIMEOUT_S)
    events, reused = await speak(tts, "Second answer after a pause.")
    await tts.aclose()
    assert reused and events[-1].is_final
    assert word_errors("Second answer after a pause.", await transcribe(server, pcm_of(events), 24000)) <= 1


async def test_tts_stream_at_16_khz(server, http):
    text = "We give the answer at a lower rate."  # no "here is", which Whisper may write "here's"
    tts = deepgram.TTS(api_key=KEY, base_url=server + "/v1/speak", http_session=http, sample_rate=16000)
    events, _ = await speak(tts, text)
    await tts.aclose()
    assert {(e.frame.sample_rate, e.frame.num_channels) for e in events} == {(16000, 1)}
    assert events[-1].is_final
    assert word_errors(text, await transcribe(server, pcm_of(events), 16000)) <= 1
