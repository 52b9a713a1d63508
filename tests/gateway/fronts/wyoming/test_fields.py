"""Wyoming event fields are honoured or refused by name: ``transcribe``'s model
``name``, ``vad_sensitivity``, ``transcript_names`` and ``transcript_terms``, ``synthesize``'s ``voice.language`` and
``voice.speaker`` (on an engine without speakers)."""

from __future__ import annotations

import numpy as np
import pytest
from wyoming.event import Event
from wyoming.ping import Ping
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.gateway.fakes import FakeTtsEngine
from tests.gateway.fronts.wyoming.harness import connect, read, wyoming_server
from tests.support.fake_sidecar import FakeSidecar


@pytest.mark.parametrize(("data", "text"), [
    ({"name": "large-v3"}, "transcribe: no model 'large-v3'; the model here is tiny.en"),
    ({"vad_sensitivity": "eager"}, ('transcribe: "vad_sensitivity" \'eager\' is not one of: aggressive, default, '
                                   "relaxed")),
    ({"transcript_terms": "ComfyUI"}, 'transcribe: "transcript_terms" must be a list of strings'),
    ({"transcript_names": ["Siobhan", ""]}, "transcribe: transcript_names: a term is empty"),
    ({"transcript_terms": ["a|b"]}, ("transcribe: transcript_terms: 'a|b' holds '|'; a term holds letters, digits, "
                                     "spaces and '’-.&+/#@_:")),
    ({"transcript_names": [f"n{i}" for i in range(30)], "transcript_terms": [f"t{i}" for i in range(30)]},
     "transcribe: transcript_names and transcript_terms: more than 50 terms"),
])
async def test_transcribe_fields_that_cannot_be_honoured_are_errors(tmp_path, data, text):
    async with wyoming_server(tmp_path, asr=FakeSidecar()) as server, connect(server) as client:
        await client.write_event(Event("transcribe", data))
        event = await read(client)
        await client.write_event(Event("transcribe", {"name": "tiny.en", "language": "en"}))
        await client.write_event(Ping(text="after").event())
        after = await read(client)
    assert (event.type, event.data) == ("error", {"text": text, "code": "bad_message"})
    assert (after.type, after.data) == ("pong", {"text": "after"})  # the model's own name is taken


async def test_names_and_terms_open_the_stream_with_them_as_context(tmp_path):
    from wyoming.asr import Transcribe
    from wyoming.audio import AudioChunk, AudioStart

    from tests.gateway.fronts.wyoming.harness import RATE, pcm, the_stream

    fake = FakeSidecar()
    async with wyoming_server(tmp_path, asr=fake) as server, connect(server) as client:
        await client.write_event(Transcribe(language="en", transcript_names=["Siobhan", "Niamh"],
                                            transcript_terms=["ComfyUI", "Siobhan"]).event())
        await client.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
        await client.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=pcm(np.zeros(1600))).event())
        stream = await the_stream(fake)
    assert [h["prompt"] for h, _ in fake.frames if h.get("op") == "open" and h["stream"] == stream.id] == [
        "Siobhan, Niamh, ComfyUI."]


async def test_a_voice_language_no_voice_speaks_is_refused(tmp_path):
    engine = FakeTtsEngine()
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="Hallo.", voice=SynthesizeVoice(language="de_DE")).event())
        event = await read(client)
    assert (event.type, event.data) == ("error", {"text": "voice.language: no voice here speaks 'de_DE'; "
                                                          "languages: en", "code": "bad_request"})
    assert engine.streams == []


async def test_a_speaker_on_an_engine_without_speakers_is_refused(tmp_path):
    engine = FakeTtsEngine(options=("seed", "temperature"))
    async with wyoming_server(tmp_path, tts={"pocket": engine}) as server, connect(server) as client:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="alba", speaker="2")).event())
        event = await read(client)
    assert (event.type, event.data["text"]) == ("error", ("voice.speaker: the pocket engine has no speaker option "
                                                         "(no multi-speaker voices); options it takes: seed, "
                                                         "temperature"))
    assert engine.streams == []
