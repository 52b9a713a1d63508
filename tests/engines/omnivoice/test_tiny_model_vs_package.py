"""The gateway's OmniVoice audio equals the package's own ``OmniVoice.generate`` for the
same inputs, sample for sample (within one 16-bit step), on the tiny random model: the adapter passes the text, seed,
step count, language, instruct and voice prompt through unchanged, sentence by sentence.

The reference is the package alone: ``OmniVoice.from_pretrained`` on the same directory,
``torch.manual_seed(seed)`` before each ``generate`` (as a caller of the package seeds
it), and the gateway's float -> 16-bit conversion."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from engines.omnivoice.runtime import import_omnivoice
from engines.omnivoice.voices import ANCHOR_SEED, ANCHOR_TEXT, DESIGNED
from gateway.audio import Encoding, encode
from tests.engines.omnivoice.fakes import wav_bytes
from tests.engines.omnivoice.tiny_gateway import (
    STEPS,
    assert_different,
    assert_same_audio,
    open_client,
    socket_speech,
    speech,
)

pytestmark = pytest.mark.slow

SENTENCES = ("Hello there, this is a test.", "The second sentence follows it.")


@pytest.fixture(scope="module")
def package_model(tiny_model_dir: Path) -> Any:
    """The package's own model over the tiny directory, as a user of the package loads it."""
    omnivoice = import_omnivoice()
    import torch

    return omnivoice.OmniVoice.from_pretrained(str(tiny_model_dir), dtype=torch.float32, device_map="cpu")


@pytest.fixture
def client(tmp_path: Path, tiny_model_dir: Path) -> Iterator[TestClient]:
    with open_client(tmp_path, tiny_model_dir) as c:
        yield c


def _generate(model: Any, text: str, seed: int, **inputs: Any) -> np.ndarray:
    import torch

    torch.manual_seed(seed)
    (audio,) = model.generate(text, num_step=STEPS, **inputs)
    return np.asarray(audio, dtype=np.float32)


def _pcm(*parts: np.ndarray) -> bytes:
    return encode(np.concatenate(parts), Encoding.S16LE)


def test_a_designed_utterance_equals_generate_with_its_instruct_and_language(
        client: TestClient, package_model: Any) -> None:
    instruct, text = "male, low pitch, british accent", SENTENCES[0]
    served = speech(client, text, instruct=instruct, language="de", seed=7)
    assert_same_audio(served, _pcm(_generate(package_model, text, 7, instruct=instruct, language="de")))
    # ... and each of the two reached the model: without either, the package says something else
    assert_different(served, _pcm(_generate(package_model, text, 7, instruct=instruct)))
    assert_different(served, _pcm(_generate(package_model, text, 7, language="de")))


def test_speak_on_the_socket_carries_language_and_instruct(client: TestClient, package_model: Any) -> None:
    instruct, text = "female, high pitch, indian accent", SENTENCES[1]
    served = socket_speech(client, text=text, instruct=instruct, language="de", seed=8)
    assert_same_audio(served, _pcm(_generate(package_model, text, 8, instruct=instruct, language="de")))


def test_a_built_in_voice_equals_generate_cloning_from_its_anchor_sentence(
        client: TestClient, package_model: Any) -> None:
    voice = DESIGNED["female"]
    anchor = _generate(package_model, ANCHOR_TEXT, ANCHOR_SEED, instruct=voice.instruct, language=voice.language)
    prompt = package_model.create_voice_clone_prompt(_tensor(anchor, 24000), ref_text=ANCHOR_TEXT)
    expected = _pcm(*(_generate(package_model, s, 3, voice_clone_prompt=prompt) for s in SENTENCES))
    assert_same_audio(speech(client, " ".join(SENTENCES), seed=3), expected)


def test_a_cloned_voice_equals_generate_with_a_prompt_from_the_same_clip(
        client: TestClient, package_model: Any) -> None:
    import soundfile

    clip, transcript = wav_bytes(2.0, 24000, seed=4), "Some words in my clip."
    r = client.post("/v1/voices", data={"id": "me", "engine": "omnivoice", "ref_text": transcript},
                    files={"file": ("me.wav", clip, "audio/wav")})
    assert r.status_code == 201, r.text
    audio, rate = soundfile.read(io.BytesIO(clip), dtype="float32")
    prompt = package_model.create_voice_clone_prompt(_tensor(audio, rate), ref_text=transcript)
    expected = _pcm(*(_generate(package_model, s, 5, voice_clone_prompt=prompt) for s in SENTENCES))
    assert_same_audio(speech(client, " ".join(SENTENCES), voice="me", seed=5), expected)


def _tensor(audio: np.ndarray, rate: int) -> tuple[Any, int]:
    import torch

    return torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32).reshape(1, -1)), rate
