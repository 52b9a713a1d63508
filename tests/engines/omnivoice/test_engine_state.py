"""The OmniVoice adapter over a fake model: cloned voices through the prompt cache
(memory, disk, corrupt files, restarts), and what ``status()`` reports."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engines.base import EngineError, EngineState, EngineStatus, EngineUnavailable
from engines.missing import ModelMissing
from engines.omnivoice.engine import TRANSCRIPT_HINT, OmniVoiceEngine
from engines.omnivoice.runtime import PACKAGE_HINT, RuntimeMissing
from tests.engines.omnivoice.fakes import FakeBackend, FakeLoader, wav_bytes
from tests.engines.omnivoice.test_engine import backend_of, collect, make_engine, wait_for

# ---- cloned voices and the prompt cache


async def loaded(tmp_path: Path, backend: FakeBackend | None = None, **kw: object) -> OmniVoiceEngine:
    eng = make_engine(tmp_path, FakeLoader(backend or FakeBackend()), **kw)
    await eng.load()
    return eng


async def test_clone_keeps_the_clip_and_its_prompt_and_speaks_with_it(tmp_path: Path) -> None:
    eng = await loaded(tmp_path)
    voice = await eng.clone_voice("me", wav_bytes(), "Hello from my clip")
    assert voice.to_dict() == {"id": "me", "engine": "omnivoice", "name": "me", "language": "", "source": "cloned"}
    assert [v.id for v in eng.voices()][-1] == "me"
    assert sorted(p.name for p in (tmp_path / "voices").iterdir()) == ["me.json", "me.wav"]
    assert len(list((tmp_path / "cache").glob("*.prompt"))) == 1
    await collect(eng.open_stream("Say it.", voice="me"))
    backend = backend_of(eng)
    assert backend.calls == [("prompt", "Hello from my clip"), ("generate", "Say it.")]
    assert backend.generated[-1]["prompt"] == "Hello from my clip"
    await eng.close()


async def test_after_a_restart_the_first_request_skips_the_encode(tmp_path: Path) -> None:
    eng = await loaded(tmp_path)
    await eng.clone_voice("me", wav_bytes(), "Hello from my clip")
    await eng.close()
    again = await loaded(tmp_path)
    await collect(again.open_stream("After the restart.", voice="me"))
    assert backend_of(again).calls == [("generate", "After the restart.")]
    assert (again.prompts.cache.disk_hits, again.prompts.cache.misses) == (1, 0)
    await again.close()


async def test_a_corrupt_prompt_file_is_rebuilt_from_the_clip(tmp_path: Path) -> None:
    eng = await loaded(tmp_path)
    await eng.clone_voice("me", wav_bytes(), "Hello from my clip")
    await eng.close()
    (prompt_file,) = (tmp_path / "cache").glob("*.prompt")
    prompt_file.write_bytes(prompt_file.read_bytes()[:-5])
    again = await loaded(tmp_path)
    await collect(again.open_stream("Rebuilt.", voice="me"))
    assert backend_of(again).calls == [("prompt", "Hello from my clip"), ("generate", "Rebuilt.")]
    assert again.prompts.cache.dropped == 1
    assert len(list((tmp_path / "cache").glob("*.prompt"))) == 1
    await again.close()


async def test_without_ref_text_and_no_transcriber_the_clone_is_refused(tmp_path: Path) -> None:
    eng = await loaded(tmp_path)
    with pytest.raises(EngineError) as err:
        await eng.clone_voice("me", wav_bytes(), None)
    assert (str(err.value), err.value.code, err.value.hint) == (
        ("ref_text: required for OmniVoice voices on this server: no Whisper model is on this machine to "
        "transcribe the clip"), "bad_request", TRANSCRIPT_HINT)
    assert eng.voices()[-1].id == "male-british"
    await eng.close()


async def test_with_a_transcriber_the_clip_is_transcribed_once(tmp_path: Path) -> None:
    eng = await loaded(tmp_path, FakeBackend(can_transcribe=True))
    await eng.clone_voice("me", wav_bytes(), "  ")
    assert eng.store.get("me").transcript == "transcribed words."  # type: ignore[union-attr]
    await eng.close()


async def test_a_silent_clip_is_bad_audio_and_leaves_nothing(tmp_path: Path) -> None:
    import io

    import numpy as np
    import soundfile

    buf = io.BytesIO()
    soundfile.write(buf, np.zeros(24000, np.float32), 24000, format="WAV")
    eng = await loaded(tmp_path)
    with pytest.raises(EngineError) as err:
        await eng.clone_voice("quiet", buf.getvalue(), "Nothing here")
    assert (str(err.value), err.value.code) == (
        "file: cannot make a voice from this clip: Reference audio is empty after silence removal.", "bad_audio")
    assert not (tmp_path / "voices" / "quiet.json").exists()
    await eng.close()


@pytest.mark.parametrize(("voice_id", "message"), [
    ("female", "id: voice 'female' already exists"),
    ("bad id!", "id: 'bad id!' is not allowed (1-64 letters, digits, '_' or '-', starting with a letter or digit)"),
])
async def test_clone_refuses_taken_or_bad_ids(tmp_path: Path, voice_id: str, message: str) -> None:
    eng = await loaded(tmp_path)
    with pytest.raises(EngineError) as err:
        await eng.clone_voice(voice_id, wav_bytes(), "words")
    assert (str(err.value), err.value.code) == (message, "bad_request")
    await eng.close()


async def test_delete_removes_the_voice_its_clip_and_its_prompt(tmp_path: Path) -> None:
    eng = await loaded(tmp_path)
    await eng.clone_voice("me", wav_bytes(), "Hello from my clip")
    await eng.delete_voice("me")
    assert "me" not in [v.id for v in eng.voices()]
    assert list((tmp_path / "voices").iterdir()) == []
    assert list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(EngineError, match="^voice 'female' is built in and cannot be deleted$"):
        await eng.delete_voice("female")
    await eng.close()


# ---- state reporting


@pytest.mark.parametrize(("error", "status"), [
    (RuntimeMissing("the package torch is not installed"),
     EngineStatus(EngineState.MISSING, "OmniVoice cannot run here: the package torch is not installed", PACKAGE_HINT)),
    (RuntimeMissing("VOXGATE_DEVICE=cuda but no CUDA device is usable (torch 2.13.0 is a CPU-only build)"),
     EngineStatus(EngineState.MISSING, "OmniVoice cannot run here: VOXGATE_DEVICE=cuda but no CUDA device is usable "
                  "(torch 2.13.0 is a CPU-only build)", "set VOXGATE_DEVICE=auto (or cpu)")),
    (ModelMissing("OmniVoice model files not found: /m/config.json", "get it"),
     EngineStatus(EngineState.MISSING, "OmniVoice model files not found: /m/config.json", "get it")),
    (RuntimeError("CUDA out of memory"), EngineStatus(EngineState.FAILED, "OmniVoice failed to load: CUDA out of memory")),
])
async def test_load_failures_are_reported_with_a_reason_and_hint(tmp_path: Path, error: Exception,
                                                                 status: EngineStatus) -> None:
    eng = make_engine(tmp_path, FakeLoader(error=error))
    assert eng.status() == EngineStatus(EngineState.LOADING)
    await eng.load()
    assert eng.status() == status
    with pytest.raises(EngineUnavailable):
        eng.open_stream("Hello.")
    await eng.close()


async def test_a_missing_package_is_reported_before_any_load(tmp_path: Path) -> None:
    def no_package() -> None:
        raise RuntimeMissing("the package omnivoice is not installed")

    eng = OmniVoiceEngine(make_engine(tmp_path).spec, tmp_path / "v", tmp_path / "c", checks=no_package)  # type: ignore[arg-type]
    await eng.load()
    assert eng.status() == EngineStatus(EngineState.MISSING, "OmniVoice is not installed: the package omnivoice "
                                        "is not installed", PACKAGE_HINT)


async def test_idle_unload_says_so_and_the_next_request_reloads(tmp_path: Path) -> None:
    eng = await loaded(tmp_path, idle_unload_s=0.05)
    assert eng.status() == EngineStatus(EngineState.READY)
    await collect(eng.open_stream("Once."))
    await wait_for(lambda: not eng.loaded)
    assert eng.status() == EngineStatus(EngineState.READY, "model unloaded after 0.05 s idle; the next request "
                                        "reloads it (a few seconds)")
    assert backend_of(eng).closed
    assert len(await collect(eng.open_stream("Twice."))) == 4
    assert eng._loader.loads == 2  # type: ignore[attr-defined]
    await eng.close()


async def test_no_unload_while_an_utterance_is_open(tmp_path: Path) -> None:
    eng = await loaded(tmp_path, idle_unload_s=0.05)
    await collect(eng.open_stream("Once."))
    stream = eng.open_stream("Open but not read.")
    await asyncio.sleep(0.3)
    assert eng.loaded
    stream.cancel()
    await wait_for(lambda: not eng.loaded)
    await eng.close()


async def test_a_failed_reload_is_reported_and_refuses_the_request(tmp_path: Path) -> None:
    eng = await loaded(tmp_path, idle_unload_s=0.05)
    await collect(eng.open_stream("Once."))
    await wait_for(lambda: not eng.loaded)
    eng._loader.error = ModelMissing("OmniVoice weights not found in /m (no *.safetensors)", "get it")  # type: ignore[attr-defined]
    with pytest.raises(EngineUnavailable, match=r"^OmniVoice could not reload: OmniVoice weights not found in /m "
                                                r"\(no \*.safetensors\)$") as info:
        await collect(eng.open_stream("Again."))
    assert (info.value.engine, info.value.state) == ("omnivoice", EngineState.MISSING)
    assert eng.status() == EngineStatus(EngineState.MISSING, "OmniVoice weights not found in /m (no *.safetensors)",
                                        "get it")
    await eng.close()


async def test_info_before_and_after_loading(tmp_path: Path) -> None:
    eng = make_engine(tmp_path)
    assert eng.info().to_dict() == {"id": "omnivoice", "sample_rate": 24000, "frame_samples": 1920, "languages": [],
                                    "can_clone": False, "default_voice": "female",
                                    "options": ["seed", "language", "instruct"], "clone_uses_transcript": True}
    await eng.load()
    assert eng.info().to_dict() == {"id": "omnivoice", "sample_rate": 24000, "frame_samples": 1920,
                                    "languages": ["de", "en", "zh"], "can_clone": True, "default_voice": "female",
                                    "options": ["seed", "language", "instruct"], "clone_uses_transcript": True}
    await eng.close()
    assert eng.status() == EngineStatus(EngineState.MISSING, "OmniVoice engine closed")
