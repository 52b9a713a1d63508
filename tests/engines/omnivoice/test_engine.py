"""The OmniVoice adapter's own logic over a fake model: sentence framing, prefetch,
cancel between sentences, capacity, voices and their prompt cache, state reporting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from engines.base import EngineError, SynthesisOptions, UnknownVoice
from engines.omnivoice.backend import LoadSpec
from engines.omnivoice.engine import OmniVoiceEngine
from engines.omnivoice.stream import SentenceStream
from engines.omnivoice.voices import ANCHOR_TEXT
from tests.engines.omnivoice.fakes import FRAME, FakeBackend, FakeLoader, checks, level_for, samples_for, wav_bytes


def split(text: str) -> list[str]:
    return [part.strip() + "." for part in text.split(".") if part.strip()]


def make_engine(tmp_path: Path, loader: FakeLoader | None = None, **kw: object) -> OmniVoiceEngine:
    return OmniVoiceEngine(LoadSpec(model=str(tmp_path / "model")), tmp_path / "voices", tmp_path / "cache",
                           split_sentences=split, loader=loader or FakeLoader(), checks=checks, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[OmniVoiceEngine]:
    eng = make_engine(tmp_path)
    await eng.load()
    yield eng
    await eng.close()


def backend_of(engine: OmniVoiceEngine) -> FakeBackend:
    loader = engine._loader
    assert isinstance(loader, FakeLoader)
    return loader.backend


async def collect(stream: SentenceStream) -> list[np.ndarray]:
    return [frame async for frame in stream.frames()]


async def wait_for(predicate, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


# ---- framing and prefetch


async def test_each_sentence_is_cut_into_80_ms_frames_in_order(engine: OmniVoiceEngine) -> None:
    frames = await collect(engine.open_stream("First one. Second sentence here."))
    sentences = ["First one.", "Second sentence here."]
    expected = np.concatenate([np.full(samples_for(s), level_for(s), np.float32) for s in sentences])
    sizes = [len(f) for f in frames]
    # each sentence: whole frames of 1920 samples, then its remainder (10000 = 5*1920 + 400)
    assert sizes == [FRAME] * 5 + [400] + [FRAME] * 10 + [1800]
    assert np.array_equal(np.concatenate(frames), expected)
    assert [c for c in backend_of(engine).calls if c[0] == "generate"][1:] == [("generate", s) for s in sentences]


async def test_the_default_voice_is_anchored_once_then_every_sentence_clones_it(engine: OmniVoiceEngine) -> None:
    await collect(engine.open_stream("One. Two."))
    await collect(engine.open_stream("Three."))
    backend = backend_of(engine)
    assert backend.calls == [("generate", ANCHOR_TEXT), ("prompt", ANCHOR_TEXT), ("generate", "One."),
                             ("generate", "Two."), ("generate", "Three.")]
    anchor, *spoken = backend.generated
    assert anchor == {"text": ANCHOR_TEXT, "prompt": None, "instruct": "female, young adult, moderate pitch, "
                      "american accent", "language": "en", "seed": 1234}
    assert {(g["prompt"], g["instruct"]) for g in spoken} == {(ANCHOR_TEXT, None)}


async def test_the_next_sentence_generates_while_this_one_plays(engine: OmniVoiceEngine) -> None:
    backend = backend_of(engine)
    await collect(engine.open_stream("Warm up."))  # the default voice's anchor is made
    stream = engine.open_stream("Alpha. Beta.")
    frames = stream.frames()
    first = await frames.__anext__()
    assert first[0] == level_for("Alpha.")
    beta = backend.started.setdefault("Beta.", threading.Event())
    await asyncio.to_thread(beta.wait, 10)  # started while Alpha's frames are not consumed
    assert stream.frames_yielded == 1
    rest = [f async for f in frames]
    assert [len(f) for f in rest] == [FRAME, FRAME, 240, FRAME, FRAME, 1160]
    assert rest[-1][0] == level_for("Beta.")


# ---- cancel


async def test_cancel_drops_the_queued_sentence_and_ends_the_stream(engine: OmniVoiceEngine) -> None:
    backend = backend_of(engine)
    await collect(engine.open_stream("Warm up."))
    backend.gates["Two."] = threading.Event()
    stream = engine.open_stream("One. Two. Three.")
    frames = stream.frames()
    await frames.__anext__()
    await asyncio.to_thread(backend.started.setdefault("Two.", threading.Event()).wait, 10)
    stream.cancel()  # Two is generating (cannot stop), Three is not queued yet
    assert [f async for f in frames] == []  # ends at once, without Two's audio
    backend.gates["Two."].set()
    await wait_for(lambda: engine._worker.queued == 0 and engine.active_streams == 0)
    await collect(engine.open_stream("After."))
    assert [c[1] for c in backend.calls if c[0] == "generate"][-3:] == ["One.", "Two.", "After."]


async def test_cancel_while_waiting_in_the_queue_means_that_sentence_never_runs(engine: OmniVoiceEngine) -> None:
    backend = backend_of(engine)
    await collect(engine.open_stream("Warm up."))
    backend.gates["Blocker."] = threading.Event()
    blocker = engine.open_stream("Blocker.")
    blocking = asyncio.ensure_future(collect(blocker))
    await asyncio.to_thread(backend.started.setdefault("Blocker.", threading.Event()).wait, 10)
    waiting = engine.open_stream("Queued.")
    consumer = asyncio.ensure_future(collect(waiting))
    await wait_for(lambda: engine._worker.queued == 1)
    waiting.cancel()
    assert await consumer == []
    backend.gates["Blocker."].set()
    assert len(await blocking) == 5
    await collect(engine.open_stream("Later."))
    assert "Queued." not in [c[1] for c in backend.calls]
    assert engine.active_streams == 0


async def test_cancel_before_reading_releases_the_slot(engine: OmniVoiceEngine) -> None:
    stream = engine.open_stream("Never read.")
    assert engine.active_streams == 1
    stream.cancel()
    stream.cancel()
    assert engine.active_streams == 0
    assert await collect(stream) == []


# ---- capacity and errors


async def test_one_stream_over_the_limit_is_over_capacity(tmp_path: Path) -> None:
    eng = make_engine(tmp_path, max_streams=2)
    await eng.load()
    a, b = eng.open_stream("A."), eng.open_stream("B.")
    with pytest.raises(EngineError, match=r"^OmniVoice is busy: 2 utterances are waiting or generating \(the limit "
                                          r"is 2\); try again shortly$") as err:
        eng.open_stream("C.")
    assert err.value.code == "over_capacity"
    await collect(a)
    eng.open_stream("C.").cancel()
    b.cancel()
    await eng.close()


async def test_a_model_failure_is_an_engine_error_of_that_utterance(engine: OmniVoiceEngine) -> None:
    backend_of(engine).fail_on = "Bad."
    with pytest.raises(EngineError, match="^OmniVoice failed on a sentence: fake model failure$") as err:
        await collect(engine.open_stream("Bad."))
    assert err.value.code == "engine_error"
    assert len(await collect(engine.open_stream("Good."))) == 3
    assert engine.active_streams == 0


async def test_a_sentence_that_takes_too_long_times_out(tmp_path: Path) -> None:
    eng = make_engine(tmp_path, generate_timeout_s=0.2)
    await eng.load()
    backend = backend_of(eng)
    backend.gates[ANCHOR_TEXT] = threading.Event()
    with pytest.raises(EngineError, match=r"^OmniVoice produced no audio for a sentence in 0.2 s$") as err:
        await collect(eng.open_stream("Slow."))
    assert err.value.code == "engine_timeout"
    backend.gates[ANCHOR_TEXT].set()
    await eng.close()


@pytest.mark.parametrize(("extra", "message"), [
    ({"language": "xx"}, ("language: 'xx' is not a language OmniVoice knows; use an ISO 639 code (en, zh, ja, de, "
                         "...) or an English name (English, German, ...)")),
    ({"language": 5}, ("language: '5' is not a language OmniVoice knows; use an ISO 639 code (en, zh, ja, de, ...) "
                      "or an English name (English, German, ...)")),
    ({"instruct": "robot voice"}, "instruct: Unsupported instruct items: 'robot voice'"),
    ({"instruct": 3}, "instruct: must be a string such as \"female, low pitch, british accent\""),
])
async def test_bad_options_are_refused_at_once(engine: OmniVoiceEngine, extra: dict[str, object],
                                               message: str) -> None:
    with pytest.raises(EngineError) as err:
        engine.open_stream("Hello.", options=SynthesisOptions(extra=extra))
    assert (str(err.value), err.value.code) == (message, "bad_request")
    assert engine.active_streams == 0


async def test_unknown_voice_and_empty_text(engine: OmniVoiceEngine) -> None:
    with pytest.raises(UnknownVoice) as err:
        engine.open_stream("Hi.", voice="nobody")
    assert err.value.available == ["female", "male", "female-british", "male-british"]
    with pytest.raises(EngineError, match=r"^text: nothing to say \(empty or whitespace only\)$"):
        engine.open_stream("  ")


async def test_language_and_instruct_reach_every_sentence(engine: OmniVoiceEngine) -> None:
    options = SynthesisOptions(seed=7, extra={"instruct": "male, low pitch", "language": "German"})
    await collect(engine.open_stream("Eins. Zwei.", options=options))
    backend = backend_of(engine)
    assert backend.calls == [("generate", "Eins."), ("prompt", "Eins."), ("generate", "Zwei.")]
    assert backend.generated == [
        {"text": "Eins.", "prompt": None, "instruct": "male, low pitch", "language": "de", "seed": 7},
        {"text": "Zwei.", "prompt": "Eins.", "instruct": "male, low pitch", "language": "de", "seed": 7}]


@pytest.mark.parametrize("voice", [None, "female", "male-british"])
async def test_instruct_replaces_a_built_in_voice(engine: OmniVoiceEngine, voice: str | None) -> None:
    # the gateway names the engine's default voice ("female") when a request names none
    options = SynthesisOptions(seed=7, extra={"instruct": "male, low pitch"})
    await collect(engine.open_stream("Eins.", voice=voice, options=options))
    backend = backend_of(engine)
    assert backend.calls == [("generate", "Eins.")]  # no anchor of the built-in voice
    assert backend.generated == [{"text": "Eins.", "prompt": None, "instruct": "male, low pitch", "language": None,
                                  "seed": 7}]


async def test_instruct_with_a_cloned_voice_keeps_the_clip(engine: OmniVoiceEngine) -> None:
    await engine.clone_voice("me", wav_bytes(), "My words.")
    await collect(engine.open_stream("Eins.", voice="me", options=SynthesisOptions(extra={"instruct": "whisper"})))
    generated = backend_of(engine).generated
    assert generated == [{"text": "Eins.", "prompt": "My words.", "instruct": "whisper", "language": None,
                          "seed": None}]
