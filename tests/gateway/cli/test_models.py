"""`voxgate models`: names the Pocket TTS models to choose from, their sizes, and
where their capacity is documented."""

from __future__ import annotations

import math

import pytest

from gateway.cli.main import main
from gateway.cli.models import POCKET_RELEASES

EXPECTED = """\
Pocket TTS models (English) the engine serves; set VOXGATE_POCKET_DIR to the directory of one
  model                   weights  speech path  architecture
  english                  109.5M        99.8M  6 x 1024 LM, LSD flow head, 512-wide Mimi decoder (the default)
  english_2026-04_24l      336.1M       326.3M  24 x 1024 LM, LSD flow head, 512-wide Mimi decoder
  english_drifting_26-09   108.7M        99.0M  6 x 1024 LM, drifting flow head, 512-wide Mimi decoder
  english_18m_2026-10       27.9M        18.2M  8 x 512 LM, drifting flow head, 128-wide 12-layer Mimi decoder
  english_7m_2026-10        16.6M         6.9M  8 x 224 LM (8/2 grouped-query heads), drifting flow head, \
128-wide 12-layer decoder
  english_2m_2026-10        11.7M         1.9M  8 x 112 LM (3/1 grouped-query heads), pointwise flow head, \
128-wide 4-layer decoder
weights: every tensor of model.safetensors; speech path: what each 80 ms frame runs (the flow LM and Mimi's \
decoder; Mimi's encoder only clones voices)
real-time streams each holds on 2 CPU cores: docs/engines/pocket.md#capacity-per-model, \
docs/deployment.md#pocket-tts-models-on-2-cores
"""


@pytest.mark.parametrize("argv", [["models"], ["models", "list"]])
def test_models_lists_the_pocket_choices_with_their_sizes(argv, capsys) -> None:
    assert main(argv) == 0
    out = capsys.readouterr()
    assert (out.out, out.err) == (EXPECTED, "")


def test_the_english_sizes_are_those_of_its_checkpoint_layout() -> None:
    from engines.pocket.checkpoint_layout import checkpoint_layout
    from engines.pocket.random_checkpoint import PRESETS

    layout = checkpoint_layout(PRESETS["english"].geometry)
    encoder = ("mimi.encoder.", "mimi.encoder_transformer.", "mimi.downsample.")
    english = POCKET_RELEASES[0]
    assert english.name == "english"
    assert sum(math.prod(shape) for shape in layout.values()) == english.weights
    assert sum(math.prod(shape) for key, shape in layout.items() if not key.startswith(encoder)) == \
        english.speech_path


def test_the_documented_anchors_exist() -> None:
    from pathlib import Path

    from gateway.cli.models import CAPACITY_DOCS

    root = Path(__file__).resolve().parents[3]
    for ref in CAPACITY_DOCS:
        path, anchor = ref.split("#")
        headings = [line.lstrip("#").strip().lower() for line in (root / path).read_text().splitlines()
                    if line.startswith("#")]
        slugs = {"".join(c for c in h if c.isalnum() or c in " -").replace(" ", "-") for h in headings}
        assert anchor in slugs, ref
