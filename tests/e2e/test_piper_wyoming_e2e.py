"""Piper and the Wyoming front end to end: a real `voxgate serve` process with the
real Piper voice, the real ASR sidecar (tiny.en) and a Wyoming listener, driven by
the gateway's own clients and the real ``wyoming`` package's client.

Piper's speech is proven real by transcribing it: /v1/tts -> /v1/dictation on a
dozen sentences, and Wyoming synthesize -> Wyoming transcribe."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

from gateway.client.dictation import DictationClient
from gateway.client.tts import TtsClient
from tests.e2e.gateway_process import running_gateway
from tests.support.net import free_port
from tests.support.speech import SENTENCES, silence, word_errors

pytestmark = pytest.mark.slow

MAX_WER = 0.2  # tiny.en on this Piper voice: about 10% over a dozen Harvard sentences
MAX_FEW_WER = 0.35  # over one or a few sentences (Piper's noise differs every run, so does tiny.en's error)
READ_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_WYOMING_URI": f"tcp://127.0.0.1:{port}"}
    data = tmp_path_factory.mktemp("data")
    with running_gateway(data, "pocket,piper,asr", env=env) as gw:
        yield gw.url, port, data


def total_wer(references: list[str], hypotheses: list[str]) -> float:
    errors = total = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        e, n = word_errors(reference, hypothesis)
        errors, total = errors + e, total + n
    return errors / total


async def read(client: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(client.read_event(), READ_TIMEOUT_S)
    assert event is not None, "the server closed the connection"
    return event


async def read_until(client: AsyncTcpClient, last: str) -> list[Event]:
    events = [await read(client)]
    while events[-1].type != last:
        assert events[-1].type != "error", events[-1].data
        events.append(await read(client))
    return events


async def wyoming_speak(port: int, text: str) -> tuple[bytes, int]:
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text).event())
        events = await read_until(client, "audio-stop")
    start = events[0]
    assert start.type == "audio-start"
    return b"".join(e.payload for e in events if e.type == "audio-chunk"), start.data["rate"]


async def wyoming_transcribe(port: int, pcm: bytes, rate: int, realtime: bool = False,
                             transcribe: Transcribe | None = None) -> tuple[list[Event], int]:
    """Send ``pcm`` as Wyoming audio; the events answered and how many arrived before audio-stop was sent."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        events: list[Event] = []

        async def reader():
            while not events or events[-1].type != "transcript-stop":
                events.append(await read(client))
                assert events[-1].type != "error", events[-1].data

        task = asyncio.create_task(reader())
        await client.write_event((transcribe or Transcribe(language="en")).event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        step = rate // 10 * 2  # 100 ms
        for offset in range(0, len(pcm), step):
            await client.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=pcm[offset:offset + step]).event())
            if realtime:
                await asyncio.sleep(0.1)
        before_stop = len(events)
        await client.write_event(AudioStop().event())
        await asyncio.wait_for(task, READ_TIMEOUT_S)
    return events, before_stop


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes()


def test_piper_is_the_default_engine_when_pocket_has_no_weights(server):
    url, _, data = server
    engines = {e["id"]: e for e in httpx.get(url + "/v1/engines").json()["engines"]}
    assert engines["pocket"]["state"] == "missing" and engines["pocket"]["default"] is False
    assert engines["piper"] == {
        "kind": "tts", "default": True, "id": "piper", "sample_rate": 22050, "frame_samples": 1764,
        "languages": ["en"], "can_clone": False, "default_voice": "en_US-joe-medium", "state": "ready",
        "options": ["speaker"], "clone_uses_transcript": False,
        "default_reason": f"Pocket TTS weights not found at {data}/models/pocket/model.safetensors "
                          "(voxgate models pull pocket)"}


async def test_piper_through_v1_tts_is_speech_that_v1_dictation_transcribes(server):
    url = server[0]
    references = list(SENTENCES[:12])
    audio = [silence(0.3)]
    async with await TtsClient.connect(url, engine="piper", sample_rate=16000) as tts:
        assert tts.ready["engine"] == "piper" and tts.ready["voice"] == "en_US-joe-medium"
        for sentence in references:
            utterance = await tts.synthesize(sentence)
            assert utterance.frames > 0 and utterance.end["type"] == "end"
            audio += [np.frombuffer(utterance.audio, dtype="<i2").astype(np.float32) / 32768, silence(1.0)]
        await tts.close()
    async with await DictationClient.connect(url, interim=False) as dictation:
        sender = asyncio.create_task(dictation.stream_samples(np.concatenate(audio), realtime=False))
        await sender
        await dictation.end()
        finals = [e["text"] for e in [e async for e in dictation.events()] if e["type"] == "final"]
    assert len(finals) == 12, finals
    assert total_wer(references, finals) <= MAX_WER, finals


async def test_describe_lists_whisper_and_the_piper_voice_first(server):
    async with AsyncTcpClient("127.0.0.1", server[1]) as client:
        await client.write_event(Describe().event())
        info = Info.from_event(await read(client))
    assert [(m.name, m.languages, m.installed) for m in info.asr[0].models] == [("tiny.en", ["en"], True)]
    assert [(p.name, p.installed) for p in info.tts] == [("voxgate-piper", True), ("voxgate-pocket", False)]
    assert [v.name for v in info.tts[0].voices] == ["en_US-joe-medium"]


async def test_wyoming_synthesize_then_transcribe_round_trip(server):
    port = server[1]
    references = list(SENTENCES[:6])
    hypotheses = []
    for sentence in references:
        pcm, rate = await wyoming_speak(port, sentence)
        assert rate == 22050 and len(pcm) > rate  # more than half a second of speech
        events, _ = await wyoming_transcribe(port, pcm + bytes(rate), rate)
        hypotheses.append(next(e.data["text"] for e in events if e.type == "transcript"))
    assert total_wer(references, hypotheses) <= MAX_FEW_WER, hypotheses


async def test_transcript_streams_while_the_audio_flows(server):
    port = server[1]
    first, second = SENTENCES[0], SENTENCES[1]
    (a, rate), (b, _) = await wyoming_speak(port, first), await wyoming_speak(port, second)
    pcm = a + bytes(int(1.2 * rate) * 2) + b + bytes(rate)
    events, before_stop = await wyoming_transcribe(port, pcm, rate, realtime=True)
    kinds = [e.type for e in events]
    assert kinds[0] == "transcript-start" and kinds[-2:] == ["transcript", "transcript-stop"]
    assert set(kinds[1:-2]) == {"transcript-chunk"}
    assert before_stop >= 2  # transcript-start and the first utterance's text came before audio-stop
    text = events[-2].data["text"]
    streamed = "".join(e.data["text"] for e in events if e.type == "transcript-chunk")
    # the chunks follow the partials: a word revised after it went out stays as sent, the rest follows
    assert total_wer([text], [streamed]) <= MAX_FEW_WER, (streamed, text)
    assert total_wer([f"{first} {second}"], [text]) <= MAX_FEW_WER, text


async def test_the_first_chunk_of_a_long_utterance_comes_while_it_is_spoken(server, record_property):
    """A ~9 s utterance streamed at real time: the first transcript-chunk arrives
    while audio is still being sent (the figure, from speech start, is recorded)."""
    port = server[1]
    text = " ".join(SENTENCES[:4])
    pcm, rate = await wyoming_speak(port, text)
    samples = np.frombuffer(pcm, dtype="<i2")
    assert 8.0 <= len(samples) / rate <= 12.0, len(samples) / rate
    speech_start_s = int(np.argmax(np.abs(samples) > 1000)) / rate  # the first sample above -30 dBFS
    first_chunk_s, stop_sent_s = await first_chunk_at(port, pcm + bytes(rate * 2), rate)
    record_property("wyoming_first_chunk_after_speech_start_s", round(first_chunk_s - speech_start_s, 3))
    print(f"first transcript-chunk {first_chunk_s - speech_start_s:.2f} s after speech start "
          f"(audio-stop sent at {stop_sent_s:.2f} s)")
    assert first_chunk_s < stop_sent_s  # the transcript streams while the speaker still speaks


async def first_chunk_at(port: int, pcm: bytes, rate: int) -> tuple[float, float]:
    """Send ``pcm`` at real time (100 ms chunks on an absolute schedule); when, from
    the first audio sent, the first transcript-chunk came and audio-stop was sent."""
    loop = asyncio.get_running_loop()
    async with AsyncTcpClient("127.0.0.1", port) as client:
        first: asyncio.Future[float] = loop.create_future()

        async def reader() -> None:
            while True:
                event = await read(client)
                assert event.type != "error", event.data
                if event.type == "transcript-chunk" and not first.done():
                    first.set_result(loop.time())
                if event.type == "transcript-stop":
                    return

        task = asyncio.create_task(reader())
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        step = rate // 10 * 2
        began = loop.time()
        for index, offset in enumerate(range(0, len(pcm), step)):
            await asyncio.sleep(max(0.0, began + index * 0.1 - loop.time()))
            await client.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=pcm[offset:offset + step]).event())
        stop_sent = loop.time()
        await client.write_event(AudioStop().event())
        await asyncio.wait_for(task, READ_TIMEOUT_S)
    assert first.done(), "no transcript-chunk came"
    return first.result() - began, stop_sent - began


async def test_vad_endpointing_answers_at_the_end_of_speech(server):
    port = server[1]
    pcm, rate = await wyoming_speak(port, SENTENCES[2])
    events, before_stop = await wyoming_transcribe(port, pcm + bytes(3 * rate * 2), rate, realtime=True,
                                                   transcribe=Transcribe(language="en", vad_sensitivity="default"))
    assert before_stop == len(events)  # the whole answer was in before audio-stop was sent
    assert total_wer([SENTENCES[2]], [events[-2].data["text"]]) <= MAX_FEW_WER


async def test_streaming_synthesize_speaks_each_block_and_stops(server):
    async with AsyncTcpClient("127.0.0.1", server[1]) as client:
        await client.write_event(SynthesizeStart().event())
        for word in f"{SENTENCES[3]} {SENTENCES[4]}".split(" "):
            await client.write_event(SynthesizeChunk(text=word + " ").event())
        await client.write_event(Synthesize(text=f"{SENTENCES[3]} {SENTENCES[4]}").event())
        await client.write_event(SynthesizeStop().event())
        events = await read_until(client, "synthesize-stopped")
    kinds = [e.type for e in events if e.type != "audio-chunk"]
    assert kinds[-1] == "synthesize-stopped"
    assert kinds[:-1] == ["audio-start", "audio-stop"] * (len(kinds) // 2)
    assert 1 <= len(kinds) // 2 <= 2
    assert all(e.data["rate"] == 22050 and len(e.payload) <= 1764 * 2 for e in events if e.type == "audio-chunk")


async def test_leaving_mid_synthesis_frees_the_session_and_the_server_goes_on(server):
    url, port = server[0], server[1]
    async with httpx.AsyncClient(base_url=url) as http:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Synthesize(text=" ".join(SENTENCES)).event())
            assert (await read(client)).type == "audio-start"
            assert (await read(client)).type == "audio-chunk"
            sessions = (await http.get("/v1/admin/sessions")).json()["sessions"]
            assert [s["kind"] for s in sessions] == ["tts"]
        for _ in range(600):
            sessions = (await http.get("/v1/admin/sessions")).json()["sessions"]
            if not sessions:
                break
            await asyncio.sleep(0.05)
        assert sessions == []
    pcm, _ = await wyoming_speak(port, "Still here.")
    assert pcm


async def test_broken_bytes_get_an_error_and_the_connection_closes(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server[1])
    writer.write(b'{"type": "synthesize", "data_length": 5}\n{"te')
    writer.write_eof()
    data = await asyncio.wait_for(reader.read(), READ_TIMEOUT_S)
    writer.close()
    assert data.endswith(b'{"text": "synthesize: the connection ended before the announced data or payload", '
                         b'"code": "bad_message"}')
