"""Piper's int8 decoder end to end: a real `voxgate serve` process with
VOXGATE_PIPER_PRECISION=int8 loads it, and its speech through /v1/tts is
transcribed by the same process's /v1/dictation (tiny.en) on a dozen sentences."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from gateway.client.dictation import DictationClient
from gateway.client.tts import TtsClient
from tests.e2e.gateway_process import running_gateway
from tests.support.speech import SENTENCES, silence, word_errors

pytestmark = pytest.mark.slow

MAX_WER = 0.2  # the float32 decoder's bound in test_piper_wyoming_e2e.py: int8 is held to the same


async def test_the_int8_decoder_loads_and_speaks_what_dictation_transcribes(tmp_path):
    log = tmp_path / "gateway.log"
    env = {"VOXGATE_ASR_THREADS": "2", "VOXGATE_PIPER_PRECISION": "int8", "VOXGATE_LOG_LEVEL": "info"}
    references = list(SENTENCES[:12])
    with running_gateway(tmp_path / "data", "piper,asr", env=env, log=log) as gw:
        lines = log.read_text().splitlines()
        assert any("Piper voice en_US-joe-medium: int8 decoder ready in" in line for line in lines), lines
        assert any("default en_US-joe-medium at 22050 Hz (fast graph, int8 decoder)" in line for line in lines), lines
        audio = [silence(0.3)]
        async with await TtsClient.connect(gw.url, engine="piper", sample_rate=16000) as tts:
            for sentence in references:
                utterance = await tts.synthesize(sentence)
                assert utterance.frames > 0 and utterance.end["type"] == "end"
                audio += [np.frombuffer(utterance.audio, dtype="<i2").astype(np.float32) / 32768, silence(1.0)]
            await tts.close()
        async with await DictationClient.connect(gw.url, interim=False) as dictation:
            sender = asyncio.create_task(dictation.stream_samples(np.concatenate(audio), realtime=False))
            await sender
            await dictation.end()
            finals = [e["text"] for e in [e async for e in dictation.events()] if e["type"] == "final"]
    assert len(finals) == 12, finals
    errors = [word_errors(reference, heard) for reference, heard in zip(references, finals, strict=True)]
    assert sum(e for e, _ in errors) / sum(n for _, n in errors) <= MAX_WER, finals
