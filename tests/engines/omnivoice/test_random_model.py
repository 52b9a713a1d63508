"""The tiny random OmniVoice's codec follows its input, as the released one does: different
codes decode to different audio and different clips encode to different codes. (With
transformers' initial zero codebooks every code decodes to the same waveform, and the
tests that vary the seed, the steps or the text could not fail.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engines.omnivoice.random_model import HOP, SAMPLE_RATE
from engines.omnivoice.runtime import import_omnivoice

pytestmark = pytest.mark.slow

QUANTIZERS, CODES = 8, 1024


@pytest.fixture(scope="module")
def codec(tiny_model_dir: Path) -> Any:
    """The audio tokenizer as the package loads it (from the model's ``audio_tokenizer/``)."""
    import_omnivoice()
    from transformers import HiggsAudioV2TokenizerModel

    return HiggsAudioV2TokenizerModel.from_pretrained(str(tiny_model_dir / "audio_tokenizer")).eval()


def _decode(codec: Any, codes: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        return np.asarray(codec.decode(codes).audio_values[0, 0], dtype=np.float64)


def _rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(audio ** 2)))


def test_random_codes_decode_to_an_audible_level(codec: Any) -> None:
    import torch

    codes = torch.randint(0, CODES, (1, QUANTIZERS, 25), generator=torch.Generator().manual_seed(7))
    audio = _decode(codec, codes)
    assert len(audio) == 25 * HOP
    assert 0.1 < _rms(audio) < 0.4  # about -14 dBFS: OmniVoice's post-processing keeps it


def test_different_codes_decode_to_different_audio(codec: Any) -> None:
    import torch

    generator = torch.Generator().manual_seed(8)
    first, second = (torch.randint(0, CODES, (1, QUANTIZERS, 25), generator=generator) for _ in range(2))
    a, b = _decode(codec, first), _decode(codec, second)
    assert _rms(a - b) >= 0.5 * _rms(a)


@pytest.mark.parametrize("quantizer", [0, QUANTIZERS - 1])
def test_one_code_of_any_quantizer_changes_the_audio_around_its_frame(codec: Any, quantizer: int) -> None:
    import torch

    codes = torch.randint(0, CODES, (1, QUANTIZERS, 25), generator=torch.Generator().manual_seed(9))
    changed = codes.clone()
    changed[0, quantizer, 12] = (changed[0, quantizer, 12] + 1) % CODES
    a, b = _decode(codec, codes), _decode(codec, changed)
    frame = slice(12 * HOP, 13 * HOP)
    assert _rms(a[frame] - b[frame]) >= 0.05 * _rms(a[frame])


def test_different_clips_encode_to_different_codes(codec: Any) -> None:
    import torch

    t = torch.arange(SAMPLE_RATE, dtype=torch.float32) / SAMPLE_RATE
    noise = torch.randn(SAMPLE_RATE, generator=torch.Generator().manual_seed(10)) * 0.1
    tone = 0.3 * torch.sin(2 * torch.pi * 220.0 * t)
    with torch.no_grad():
        codes = [codec.encode(clip.view(1, 1, -1)).audio_codes[0] for clip in (noise, tone)]
    assert codes[0].shape == (QUANTIZERS, SAMPLE_RATE // HOP)
    assert float((codes[0] != codes[1]).float().mean()) >= 0.5
    assert all(len(torch.unique(codes[0][q])) > 1 for q in range(QUANTIZERS))  # a clip is not one code repeated
