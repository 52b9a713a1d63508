"""Geometry read off the shapes of every released variant (built by the reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.pocket.model import build_model
from tests.engines.pocket.pocket_reference import run_reference

pytestmark = pytest.mark.reference

CONFIGS = ["english", "english_2026-04_24l", "english_drifting_26-09", "english_18m_2026-10",
           "english_7m_2026-10", "english_2m_2026-10"]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("shapes") / "shapes.json"
    run_reference("shapes", str(out), *CONFIGS)
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", CONFIGS)
def test_every_released_variant_builds_with_exact_shapes(released: dict, name: str) -> None:
    shapes = {k: tuple(v) for k, v in released[name]["shapes"].items()}
    config = released[name]["config"]
    model = build_model(shapes, Path(f"{name}/model.safetensors"))  # raises on any mismatch
    g = model.geometry
    assert g.lm_layers == config["num_layers"]
    assert (g.lm_heads, g.lm_kv_heads) == (config["num_heads"], config["num_kv_heads"])
    assert g.flow_type == config["flow_type"]
    assert model.defaults.eos_threshold == config["eos_threshold"]
    assert g.decoder_transformer.context == config["decoder_context"]
    assert g.decoder_transformer.num_heads == config["decoder_heads"]
    assert list(g.decoder.ratios) == config["ratios"]
    assert model.frame_samples == 1920
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == shapes


def test_english_geometry_matches_the_published_key_list() -> None:
    listing = Path(__file__).with_name("data") / "english_state_dict_keys.txt"
    published = {}
    for line in listing.read_text().splitlines():
        if line and not line.startswith("#"):
            key, shape = line.split("\t")[:2]
            published[key] = tuple(int(x) for x in shape.strip("()").split(",") if x.strip())
    ours = build_model(published, Path("model.safetensors"))
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == published
    g = ours.geometry
    assert (g.lm_dim, g.lm_layers, g.lm_heads, g.vocab_size, g.flow_dim, g.flow_depth) == \
        (1024, 6, 16, 4000, 512, 6)
