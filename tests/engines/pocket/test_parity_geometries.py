"""Parity on the other released English geometries the capacity table lists.

``english_2026-04_24l`` (24 x 1024 LM, LSD head), ``english_drifting_26-09`` (6 x 1024
LM, drifting head) and ``english_18m_2026-10`` (8 x 512 LM, drifting head, 128-wide
12-layer Mimi decoder), each built by the reference from its config (vocabulary 600,
300 for the 18M model). Kept cheap for CI: one build per geometry, one short text.
The English, 2M and 7M geometries are covered by test_parity_english.py and
test_parity_small.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from engines.pocket import PocketStream, load_model
from gateway.cli.models import POCKET_RELEASES
from tests.engines.pocket.pocket_reference import TEXTS, reference_jobs, run_reference

pytestmark = [pytest.mark.slow, pytest.mark.reference]

RELEASED_VOCAB = 4000
# geometry -> (LM layers, width, heads, kv heads, flow head, decoder width, decoder layers)
EXPECTED = {
    "english_2026-04_24l": (24, 1024, 16, 16, "lsd", 512, 2),
    "english_drifting_26-09": (6, 1024, 16, 16, "drifting", 512, 2),
    "english_18m_2026-10": (8, 512, 8, 8, "drifting", 128, 12),
}


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Ours on one thread, like the reference: on a machine busy with other work, a
    second torch thread waits for a core at every operation and a frame takes seconds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=list(EXPECTED))
def built(request, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp(f"pocket-{request.param}")
    model_dir = root / "model"
    run_reference("build", str(model_dir), request.param, "1")
    jobs = [{"kind": "generate", "name": "tiny", "text": TEXTS["tiny"], "seed": 3, "temperature": 0.3,
             "voice": str(model_dir / "embeddings" / "alba.safetensors")}]
    return request.param, load_model(model_dir), reference_jobs(model_dir, jobs, root)


def test_geometry_is_detected_and_sized_as_released(built) -> None:
    name, model, _ = built
    g = model.geometry
    d = g.decoder_transformer
    assert (g.lm_layers, g.lm_dim, g.lm_heads, g.lm_kv_heads, g.flow_type, d.d_model, d.num_layers) == \
        EXPECTED[name]
    # The build's vocabulary is smaller than the release's; every other tensor has its shape.
    values = sum(math.prod(t.shape) for t in model.state_dict().values())
    embed_rows, embed_width = model.state_dict()["flow_lm.conditioner.embed.weight"].shape
    released = next(r for r in POCKET_RELEASES if r.name == name)
    assert values + (RELEASED_VOCAB + 1 - embed_rows) * embed_width == released.weights


def test_audio_matches_reference(built) -> None:
    _, model, reference = built
    settings = replace(model.defaults, temperature=0.3)
    ours = np.concatenate(list(PocketStream(model, TEXTS["tiny"], model.load_voice("alba"), settings, seed=3)))
    expected = reference.audio("tiny").numpy()
    assert ours.shape == expected.shape
    assert np.abs(expected).max() > 0.01
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-5)

