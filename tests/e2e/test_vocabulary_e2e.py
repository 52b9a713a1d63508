"""Custom vocabulary through a real gateway and the real tiny.en model: a rare
name and a product name that tiny.en misspells come out right when the client
passes them as terms, on /v1/dictation (on connect and mid-stream), the Deepgram
front's ``keyterm`` and ``POST /v1/audio/transcriptions``' ``prompt``."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import websockets

from gateway.audio import write_wav
from gateway.client.dictation import DictationClient
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import pcm16, piper_say, resample, silence

pytestmark = pytest.mark.slow

# tiny.en writes "Shubon" and "comfy UI" for these (Piper's noise off); with the terms, the names
NAME = "Please send the invoice to Siobhan before Friday."
PRODUCT = "I installed ComfyUI on the new laptop yesterday."
TERMS = ["Siobhan", "ComfyUI"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("data"), "asr", env={"VOXGATE_ASR_THREADS": "2"}) as gw:
        yield gw.url


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    """Both sentences at 16 kHz with a pause between them long enough to end an utterance."""
    parts = [silence(0.3)]
    for text in (NAME, PRODUCT):
        samples, rate = piper_say(text, steady=True)
        parts += [resample(samples, rate), silence(1.0)]
    return np.concatenate(parts)


async def dictate(url: str, audio: np.ndarray, terms: list[str] | None = None,
                  mid_stream: list[str] | None = None) -> str:
    """The finals' text of ``audio`` sent as fast as the socket takes it;
    ``mid_stream`` terms go in a ``config`` message before the audio."""
    async with await DictationClient.connect(url, terms=terms, interim=False) as client:
        if mid_stream is not None:
            await client.set_terms(mid_stream)
        await client.stream_samples(audio, realtime=False)
        await client.end()
        events = [event async for event in client.events()]
    return " ".join(e["text"] for e in events if e["type"] == "final")


async def test_terms_on_connect_give_the_names_tiny_en_misses_without_them(server, speech):
    without = await dictate(server, speech)
    with_terms = await dictate(server, speech, terms=TERMS)
    assert [term in without for term in TERMS] == [False, False], without
    assert [term in with_terms for term in TERMS] == [True, True], with_terms


async def test_terms_sent_mid_stream_in_a_config_message_are_used(server, speech):
    text = await dictate(server, speech, mid_stream=TERMS)
    assert [term in text for term in TERMS] == [True, True], text


async def test_deepgram_keyterm_is_honoured(server, speech):
    url = server.replace("http://", "ws://") + "/v1/listen?model=nova-3&encoding=linear16&sample_rate=16000"
    finals = []
    async with websockets.connect(url + "".join(f"&keyterm={t}" for t in TERMS)) as ws:
        data = pcm16(speech)
        for i in range(0, len(data), 32000):
            await ws.send(data[i:i + 32000])
        await ws.send(json.dumps({"type": "CloseStream"}))
        async for raw in ws:
            message = json.loads(raw)
            if message.get("type") == "Results" and message.get("is_final"):
                finals.append(message["channel"]["alternatives"][0]["transcript"])
    text = " ".join(finals)
    assert [term in text for term in TERMS] == [True, True], text


async def test_a_transcription_prompt_is_honoured(server, speech):
    wav = write_wav(speech, 16000)
    async with httpx.AsyncClient(base_url=server, timeout=120) as http:
        texts = []
        for prompt in ("", "Siobhan, ComfyUI."):
            r = await http.post("/v1/audio/transcriptions", data={"model": "whisper-1", "prompt": prompt},
                                files={"file": ("speech.wav", wav, "audio/wav")})
            assert r.status_code == 200, r.text
            texts.append(r.json()["text"])
    assert [[term in text for term in TERMS] for text in texts] == [[False, False], [True, True]], texts
