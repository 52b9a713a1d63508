"""PocketEngine over a tiny random model; ``voxgate say`` in a real subprocess."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from engines.base import (
    EngineError,
    EngineState,
    EngineUnavailable,
    SynthesisOptions,
    TtsEngine,
    TtsInfo,
    TtsStream,
    UnknownVoice,
    Voice,
)
from engines.pocket.engine import GET_MODEL_HINT, PocketEngine
from tests.support.waiting import eventually

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def engine(tiny_model_dir: Path, tmp_path: Path):
    eng = PocketEngine(tiny_model_dir, tmp_path / "voices", threads=1, max_streams=4)
    await eng.load()
    yield eng
    await eng.close()


async def _collect(stream: TtsStream, limit: int | None = None) -> list[np.ndarray]:
    out = []
    async for frame in stream.frames():
        out.append(frame)
        if limit is not None and len(out) >= limit:
            break
    return out


def _wav_bytes(seconds: float = 1.5, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    signal = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes())
    return buf.getvalue()


async def test_ready_engine_describes_itself(engine: PocketEngine):
    assert isinstance(engine, TtsEngine)
    assert engine.status().state is EngineState.READY
    assert engine.info() == TtsInfo(id="pocket", sample_rate=24000, frame_samples=1920, languages=("en",),
                                    can_clone=True, default_voice="alba", options=("seed", "temperature"))
    assert engine.voices() == [Voice(id="alba", engine="pocket", source="builtin"),
                               Voice(id="marius", engine="pocket", source="builtin")]


async def test_a_stream_yields_80ms_float32_frames(engine: PocketEngine):
    stream = engine.open_stream("Hello world, how are you?", "marius", SynthesisOptions(seed=7))
    assert isinstance(stream, TtsStream)
    frames = await _collect(stream)
    assert len(frames) > 6
    assert all(f.shape == (1920,) and f.dtype == np.float32 for f in frames)
    assert all(np.isfinite(f).all() for f in frames)


async def test_same_seed_same_audio_and_temperature_zero_is_deterministic(engine: PocketEngine):
    async def run(options: SynthesisOptions) -> np.ndarray:
        return np.concatenate(await _collect(engine.open_stream("Say it twice.", None, options)))

    a, b, c = await asyncio.gather(run(SynthesisOptions(seed=1)), run(SynthesisOptions(seed=1)),
                                   run(SynthesisOptions(seed=2)))
    np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)
    assert a.shape != c.shape or not np.allclose(a, c, atol=1e-3)
    z1, z2 = await asyncio.gather(run(SynthesisOptions(temperature=0.0)), run(SynthesisOptions(temperature=0.0)))
    np.testing.assert_allclose(z1, z2, atol=1e-4, rtol=0)


async def test_cancel_stops_the_stream(engine: PocketEngine):
    stream = engine.open_stream("A long sentence that would otherwise go on for quite a while.", "alba")
    frames = stream.frames()
    assert (await frames.__anext__()).shape == (1920,)
    stream.cancel()
    stream.cancel()  # idempotent
    assert [f async for f in frames] == []
    await eventually(lambda: engine._scheduler.load() == (0, 0), "the cancelled stream's row freed")


async def test_unknown_voice_lists_the_available_ones(engine: PocketEngine):
    with pytest.raises(UnknownVoice) as info:
        engine.open_stream("Hello.", "nobody")
    assert str(info.value) == "unknown voice 'nobody'; available voices: alba, marius"
    assert info.value.code == "unknown_voice"
    assert info.value.available == ["alba", "marius"]


@pytest.mark.parametrize(("text", "options", "message"), [
    ("   ", None, "text: nothing to say (empty or whitespace only)"),
    ("Hi.", SynthesisOptions(temperature=3.0), "temperature: must be between 0 and 2, got 3"),
])
async def test_bad_requests_name_the_field(engine: PocketEngine, text, options, message):
    with pytest.raises(EngineError) as info:
        engine.open_stream(text, "alba", options)
    assert str(info.value) == message
    assert info.value.code == "bad_request"


async def test_missing_model_reports_the_file_and_the_hint(tmp_path: Path):
    eng = PocketEngine(tmp_path / "nowhere", tmp_path / "voices")
    assert eng.status().state is EngineState.LOADING
    await eng.load()
    status = eng.status()
    assert status.state is EngineState.MISSING
    assert status.detail == f"Pocket TTS weights not found: {tmp_path / 'nowhere' / 'model.safetensors'}"
    assert status.hint == GET_MODEL_HINT
    assert "voxgate models pull pocket" in status.hint and "voxgate models make-random pocket DIR" in status.hint
    assert eng.voices() == []
    with pytest.raises(EngineUnavailable) as info:
        eng.open_stream("Hello.")
    # the message and hint (for the server's log and the local CLI) name the file; a gateway tells a client
    # only the engine and its state
    assert str(info.value) == f"Pocket TTS is not available (missing: {status.detail})"
    assert (info.value.engine, info.value.state, info.value.hint) == ("pocket", EngineState.MISSING, GET_MODEL_HINT)
    await eng.close()


async def test_broken_model_file_is_failed_not_a_crash(tmp_path: Path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.safetensors").write_bytes(b"not safetensors")
    (tmp_path / "model" / "tokenizer.model").write_bytes(b"x")
    eng = PocketEngine(tmp_path / "model", tmp_path / "voices")
    await eng.load()
    assert eng.status().state is EngineState.FAILED
    assert str(tmp_path / "model" / "model.safetensors") in eng.status().detail


async def test_clone_save_reload_use_and_delete(engine: PocketEngine, tiny_model_dir: Path, tmp_path: Path):
    voice = await engine.clone_voice("my-voice", _wav_bytes())
    assert voice == Voice(id="my-voice", engine="pocket", source="cloned")
    assert (tmp_path / "voices" / "my-voice.safetensors").is_file()
    assert [p.name for p in (tmp_path / "voices").iterdir()] == ["my-voice.safetensors"]  # no temp files
    assert [v.id for v in engine.voices()] == ["alba", "marius", "my-voice"]
    frames = await _collect(engine.open_stream("Now in my voice.", "my-voice", SynthesisOptions(seed=1)))
    assert len(frames) > 6

    again = PocketEngine(tiny_model_dir, tmp_path / "voices", threads=1)
    await again.load()
    try:
        assert [v.id for v in again.voices() if v.source == "cloned"] == ["my-voice"]
    finally:
        await again.close()

    await engine.delete_voice("my-voice")
    assert not (tmp_path / "voices" / "my-voice.safetensors").exists()
    with pytest.raises(UnknownVoice):
        await engine.delete_voice("my-voice")


@pytest.mark.parametrize(("voice_id", "payload", "code", "message"), [
    ("../evil", None, "bad_request", "voice_id: '../evil' is not allowed"),
    ("alba", None, "bad_request", "voice_id: 'alba' is a built-in voice; choose another name"),
    ("fine", b"RIFF....not a wav", "bad_audio", "audio: not a readable WAV file"),
])
async def test_clone_refuses_bad_input(engine: PocketEngine, voice_id, payload, code, message):
    with pytest.raises(EngineError) as info:
        await engine.clone_voice(voice_id, payload if payload is not None else _wav_bytes())
    assert info.value.code == code
    assert str(info.value).startswith(message)


async def test_clone_refuses_a_transcript_it_would_not_use(engine: PocketEngine, tmp_path: Path):
    assert engine.info().clone_uses_transcript is False
    with pytest.raises(EngineError) as info:
        await engine.clone_voice("with-words", _wav_bytes(), transcript="It was a cold day.")
    assert (info.value.code, str(info.value)) == ("bad_request", (
        "ref_text: the pocket engine clones a voice from the audio alone and takes no transcript; leave ref_text out"))
    assert "with-words" not in [v.id for v in engine.voices()]


async def test_builtin_voices_cannot_be_deleted(engine: PocketEngine):
    with pytest.raises(EngineError, match="voice 'alba' is built into the model and cannot be deleted"):
        await engine.delete_voice("alba")


async def test_many_streams_at_once_all_finish(engine: PocketEngine):
    streams = [engine.open_stream(f"Stream number {i} speaks.", "alba", SynthesisOptions(seed=i)) for i in range(6)]
    results = await asyncio.gather(*(_collect(s) for s in streams))
    assert all(len(frames) > 6 for frames in results)


@pytest.mark.slow
def test_voxgate_say_writes_a_valid_wav(tiny_model_dir: Path, tmp_path: Path):
    out = tmp_path / "hello.wav"
    env = {**os.environ, "VOXGATE_TTS_THREADS": "1", "VOXGATE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "say", "Hello from voxgate.", "--voice", "marius",
                           "-o", str(out), "--model-dir", str(tiny_model_dir), "--temperature", "0"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"wrote {out}: ")
    with wave.open(str(out)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
        n = w.getnframes()
        pcm = np.frombuffer(w.readframes(n), dtype="<i2")
    assert n > 0 and n % 1920 == 0
    assert np.abs(pcm).max() > 0

    again = tmp_path / "again.wav"
    subprocess.run([sys.executable, "-m", "gateway.cli", "say", "Hello from voxgate.", "--voice", "marius",
                    "-o", str(again), "--model-dir", str(tiny_model_dir), "--temperature", "0"],
                   cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=True)
    # temperature 0: the same audio, each sample within one 16-bit step (the engine's Mimi decode runs
    # pipelined on its own thread, and how frames group into decode calls can round a sum the other way)
    with wave.open(str(again)) as w:
        repeat = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert len(repeat) == len(pcm)
    assert int(np.abs(repeat.astype(np.int32) - pcm.astype(np.int32)).max()) <= 1


@pytest.mark.slow
def test_voxgate_say_unknown_voice_and_missing_model(tiny_model_dir: Path, tmp_path: Path):
    env = {**os.environ, "VOXGATE_TTS_THREADS": "1", "VOXGATE_DATA_DIR": str(tmp_path / "data")}
    base = [sys.executable, "-m", "gateway.cli", "say", "Hi.", "-o", str(tmp_path / "x.wav")]
    proc = subprocess.run([*base, "--voice", "nobody", "--model-dir", str(tiny_model_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stderr) == (2, "voxgate say: unknown voice 'nobody'; available voices: alba, marius\n")
    proc = subprocess.run([*base, "--model-dir", str(tmp_path / "none")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == (f"voxgate say: Pocket TTS weights not found: {tmp_path / 'none' / 'model.safetensors'}\n"
                           f"  hint: {GET_MODEL_HINT}\n")
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.slow
def test_voxgate_say_clones_a_wav_for_one_run(tiny_model_dir: Path, tmp_path: Path):
    data = tmp_path / "data"
    env = {**os.environ, "VOXGATE_TTS_THREADS": "1", "VOXGATE_DATA_DIR": str(data)}
    clip, out = tmp_path / "clip.wav", tmp_path / "cloned.wav"
    clip.write_bytes(_wav_bytes())
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "say", "Hello from a clone.", "--voice", str(clip),
                           "-o", str(out), "--model-dir", str(tiny_model_dir), "--temperature", "0"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"at 24000 Hz, pocket voice cloned from {clip} (in " in proc.stderr
    with wave.open(str(out)) as w:
        assert (w.getnchannels(), w.getframerate()) == (1, 24000)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    assert len(pcm) > 0 and np.abs(pcm).max() > 0
    assert list((data / "voices" / "pocket").glob("*")) == []  # the clone was for this run only


# ---- against the reference (its outputs come from the session fixture ``tiny_reference``)

@pytest.mark.slow
@pytest.mark.reference
@pytest.mark.parametrize(("pipelined", "decode_chunk"), [(False, 1), (True, 1), (False, 4), (True, 4)],
                         ids=["sequential", "pipelined", "chunked", "chunked-pipelined"])
async def test_engine_audio_equals_the_reference(tiny_dir: Path, tiny_reference, tmp_path: Path, pipelined: bool,
                                                 decode_chunk: int):
    from tests.engines.pocket.pocket_reference import TEXTS

    # decode_lead_s=0: chunk from the second frame on, however far ahead the streams are
    eng = PocketEngine(tiny_dir, tmp_path / "voices", threads=2 if pipelined else 1, decode_chunk=decode_chunk,
                       decode_lead_s=0.0)
    await eng.load()
    try:
        assert eng._scheduler.pipelined is pipelined
        assert eng._scheduler.decode_chunk == decode_chunk
        streams = {name: eng.open_stream(TEXTS[name], voice, SynthesisOptions(seed=seed, temperature=0.3))
                   for name, voice, seed in (("short", "alba", 3), ("tiny", "marius", 4))}
        got = dict(zip(streams, await asyncio.gather(*(_collect(s) for s in streams.values())), strict=True))
    finally:
        await eng.close()
    for name, frames in got.items():
        expected = tiny_reference.audio(name).flatten().numpy()
        np.testing.assert_allclose(np.concatenate(frames), expected, atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.reference
def test_voxgate_say_at_temperature_zero_equals_the_reference(tiny_dir: Path, tiny_reference, tmp_path: Path):
    from gateway.audio import read_wav
    from tests.engines.pocket.pocket_reference import TEXTS

    out = tmp_path / "t0.wav"
    env = {**os.environ, "VOXGATE_TTS_THREADS": "1", "VOXGATE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "say", TEXTS["short"], "--voice", "alba",
                           "-o", str(out), "--model-dir", str(tiny_dir), "--temperature", "0",
                           "--seed", "123", "--encoding", "pcm_f32le"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    samples, rate = read_wav(out.read_bytes())
    assert rate == 24000
    np.testing.assert_allclose(samples, tiny_reference.audio("t0").flatten().numpy(), atol=1e-5, rtol=0)
