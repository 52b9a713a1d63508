"""Random-weight model directories: layout, tokenizer, voices, determinism, atomicity.

The reference package is imported only in a subprocess (importing it pins torch
to one thread for the whole process).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from engines.pocket import load_model
from engines.pocket import random_checkpoint as rc
from engines.pocket.checkpoint_layout import checkpoint_layout
from engines.pocket.geometry import detect_geometry

# The project spec's key list of the released English model (pocket-tts 4.0.1
# TTSModel.state_dict()), kept with the tests so every clone checks it.
KEYS_FILE = Path(__file__).resolve().parent / "data" / "english_state_dict_keys.txt"
REPO = Path(__file__).resolve().parents[3]


def _read_keys_file() -> dict[str, tuple[int, ...]]:
    out = {}
    for line in KEYS_FILE.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, shape, *_ = line.split("\t")
        out[key] = tuple(int(x) for x in shape.strip("()").split(",") if x.strip())
    return out


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not iterable)


def test_english_layout_is_exactly_the_reference_key_list():
    layout = checkpoint_layout(rc.PRESETS["english"].geometry)
    assert layout == _read_keys_file()
    assert sum(torch.Size(s).numel() for s in layout.values()) == 109_502_146


@pytest.mark.parametrize("name", ["english", "tiny"])
def test_preset_geometry_reads_back_as_itself(name: str):
    g = rc.PRESETS[name].geometry
    # The head width is in no weight shape; the loader takes it from a voice file.
    assert detect_geometry(checkpoint_layout(g), lm_head_dim=g.lm_head_dim) == g


def test_english_preset_reads_back_with_the_default_head_width():
    g = rc.PRESETS["english"].geometry
    assert detect_geometry(checkpoint_layout(g)) == g


def test_loader_detects_the_tiny_preset(tiny_model_dir: Path):
    assert load_model(tiny_model_dir).geometry == rc.PRESETS["tiny"].geometry


@pytest.mark.slow
def test_loader_detects_the_english_preset(english_model_dir: Path):
    assert load_model(english_model_dir).geometry == rc.PRESETS["english"].geometry


def test_layout_refuses_a_geometry_the_loader_would_read_differently():
    g = rc.PRESETS["tiny"].geometry
    with pytest.raises(ValueError, match=r"^geometry is not the released Pocket TTS architecture: "
                                         r"lm_kv_heads=1 \(reads back as 2\); "
                                         r"flow_type='drifting' \(reads back as 'lsd'\)$"):
        checkpoint_layout(dataclasses.replace(g, lm_kv_heads=1, flow_type="drifting"))


# Seeded files are reproducible byte for byte on any CPU; tests, benchmarks and parity runs
# rely on a seed naming the same model everywhere.
TINY_SEED0_SHA256 = {
    "model.safetensors": "c4b581cf6762376e916cba4fd63317eb6c0769040048ce5eb6bfa42ef2a93715",
    "embeddings/alba.safetensors": "82ca4758e8cefa1dc3756758ca83a2dfdd9f8cc672f77b8b281d8b6d657a32c6",
    "embeddings/marius.safetensors": "927443176dccdac7cf52798823d92085c646f07b7b726f786d02191126d375e2",
}


def test_tiny_seed_0_weights_and_voices_are_the_known_bytes(tiny_model_dir: Path):
    assert {name: hashlib.sha256((tiny_model_dir / name).read_bytes()).hexdigest()
            for name in TINY_SEED0_SHA256} == TINY_SEED0_SHA256


def test_tiny_directory_has_the_released_layout(tiny_model_dir: Path):
    g = rc.PRESETS["tiny"].geometry
    assert sorted(p.relative_to(tiny_model_dir).as_posix() for p in tiny_model_dir.rglob("*")) == [
        "embeddings", "embeddings/alba.safetensors", "embeddings/marius.safetensors",
        "model.safetensors", "tokenizer.model"]
    weights = _tensors(tiny_model_dir / "model.safetensors")
    assert {k: tuple(v.shape) for k, v in weights.items()} == checkpoint_layout(g)
    assert all(v.dtype == torch.float32 for v in weights.values())
    assert all(torch.isfinite(v).all() for v in weights.values())
    assert weights["flow_lm.speaker_proj_weight"].abs().sum() > 0  # the loader would leave zeros
    assert weights["flow_lm.out_eos.bias"].tolist() == [rc.EOS_BIAS]


def test_tokenizer_vocabulary_matches_the_embedding_table(tiny_model_dir: Path):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tiny_model_dir / "tokenizer.model"))
    rows = _tensors(tiny_model_dir / "model.safetensors")["flow_lm.conditioner.embed.weight"].shape[0]
    assert sp.vocab_size() == rows - 1 == rc.PRESETS["tiny"].geometry.vocab_size
    ids = sp.encode("Hello world, this is a test.")
    assert ids and all(0 <= i < sp.vocab_size() for i in ids)
    assert sp.decode(ids) == "Hello world, this is a test."


def test_voice_files_are_per_layer_kv_caches_with_offsets(tiny_model_dir: Path):
    g, frames = rc.PRESETS["tiny"].geometry, rc.PRESETS["tiny"].voice_frames
    voice = _tensors(tiny_model_dir / "embeddings" / "alba.safetensors")
    expected = {}
    for i in range(g.lm_layers):
        expected[f"transformer.layers.{i}.self_attn/cache"] = (2, 1, frames, g.lm_kv_heads, g.lm_head_dim)
        expected[f"transformer.layers.{i}.self_attn/offset"] = (1,)
    assert {k: tuple(v.shape) for k, v in voice.items()} == expected
    assert voice["transformer.layers.0.self_attn/offset"].dtype == torch.int64
    assert voice["transformer.layers.0.self_attn/offset"].tolist() == [frames]
    other = _tensors(tiny_model_dir / "embeddings" / "marius.safetensors")
    assert not torch.equal(voice["transformer.layers.0.self_attn/cache"], other["transformer.layers.0.self_attn/cache"])


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path):
    rc.make_random_model_dir(tmp_path / "a", geometry="tiny", seed=3)
    rc.make_random_model_dir(tmp_path / "b", geometry="tiny", seed=3)
    rc.make_random_model_dir(tmp_path / "c", geometry="tiny", seed=4)
    for name in ("model.safetensors", "tokenizer.model", "embeddings/alba.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a/model.safetensors").read_bytes() != (tmp_path / "c/model.safetensors").read_bytes()


def test_unknown_geometry_names_the_choices(tmp_path: Path):
    with pytest.raises(ValueError, match=r"unknown geometry 'huge'; choose one of: english, tiny"):
        rc.make_random_model_dir(tmp_path / "m", geometry="huge")
    assert list(tmp_path.iterdir()) == []


def test_failure_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def broken(vocab_size: int, seed: int) -> bytes:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(rc, "train_tokenizer", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        rc.make_random_model_dir(tmp_path / "m", geometry="tiny")
    assert list(tmp_path.iterdir()) == []


def test_existing_directory_is_replaced_whole(tmp_path: Path):
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    rc.make_random_model_dir(dest, geometry="tiny", seed=1)
    assert not (dest / "stale.txt").exists()
    assert (dest / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_cli_make_random_writes_a_model(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "models", "make-random", "pocket",
                           str(tmp_path / "m"), "--geometry", "tiny", "--seed", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"wrote a random-weight Pocket TTS model (tiny) to {tmp_path / 'm'}"
    assert (tmp_path / "m" / "embeddings" / "marius.safetensors").exists()


# ---- against the reference implementation --------------------------------------

REFERENCE_SCRIPT = textwrap.dedent('''
    import json, os, sys
    from pathlib import Path
    import torch, yaml
    from pocket_tts import TTSModel
    from pocket_tts.utils.config import CONFIGS_DIR

    model_dir, g, out_yaml = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
    cfg = yaml.safe_load((CONFIGS_DIR / "english.yaml").read_text())
    cfg["weights_path"] = str(model_dir / "model.safetensors")
    cfg["weights_path_without_voice_cloning"] = None
    f, m = cfg["flow_lm"], cfg["mimi"]
    f["flow"].update(depth=g["flow_depth"], dim=g["flow_dim"])
    f["transformer"].update(d_model=g["lm_dim"], num_heads=g["lm_heads"], num_layers=g["lm_layers"],
                            hidden_scale=g["lm_ff_dim"] // g["lm_dim"])
    f["lookup_table"] = {"dim": g["lm_dim"], "n_bins": g["vocab_size"], "tokenizer": "sentencepiece",
                         "tokenizer_path": str(model_dir / "tokenizer.model")}
    s, t = g["decoder"], g["decoder_transformer"]
    m["seanet"].update(dimension=s["dimension"], n_filters=s["n_filters"])
    m["transformer"].update(d_model=t["d_model"], num_heads=t["num_heads"], num_layers=t["num_layers"],
                            context=t["context"], dim_feedforward=t["ff_dim"], input_dimension=t["input_dim"],
                            output_dimensions=[t["output_dim"]])
    m["quantizer"]["output_dimension"] = g["outer_dim"]
    m["outer_dim"] = g["outer_dim"]
    out_yaml.write_text(yaml.safe_dump(cfg))
    model = TTSModel.load_model(config=str(out_yaml))  # load_state_dict(strict=True)
    result = {"keys": {k: list(v.shape) for k, v in model.state_dict().items()}, "runs": []}
    caps = []
    estimate = model._estimate_max_gen_len
    model._estimate_max_gen_len = lambda n: caps.append(estimate(n)) or caps[-1]
    for voice in ("alba", "marius"):
        state = model.get_state_for_audio_prompt(model_dir / "embeddings" / f"{voice}.safetensors")
        for text in ("Hello world.", "The quick brown fox jumps over the lazy dog, twice."):
            torch.manual_seed(0)
            caps.clear()
            audio = model.generate_audio(state, text)
            result["runs"].append({"samples": int(audio.shape[-1]), "finite": bool(torch.isfinite(audio).all()),
                                   "peak": float(audio.abs().max()),
                                   "cap": sum(caps)})
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)  # skip the teardown, where the reference's torch threads sometimes abort
''')


def _reference_check(model_dir: Path, geometry: str, tmp_path: Path) -> dict:
    g = json.dumps(dataclasses.asdict(rc.PRESETS[geometry].geometry))
    proc = subprocess.run([sys.executable, "-c", REFERENCE_SCRIPT, str(model_dir), g, str(tmp_path / "ref.yaml")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _assert_reference_agrees(result: dict, geometry: str) -> None:
    layout = checkpoint_layout(rc.PRESETS[geometry].geometry)
    assert {k: tuple(v) for k, v in result["keys"].items()} == layout
    for run in result["runs"]:
        frames = run["samples"] / 1920
        assert run["finite"]
        assert 0 < run["peak"] < 1.0  # audible, not clipping
        assert 6 < frames <= run["cap"]  # EOS is neither instant nor past the length cap


@pytest.mark.slow
@pytest.mark.reference
def test_reference_loads_tiny_strictly_and_generates(tiny_model_dir: Path, tmp_path: Path):
    _assert_reference_agrees(_reference_check(tiny_model_dir, "tiny", tmp_path), "tiny")


@pytest.mark.slow
@pytest.mark.reference
def test_reference_loads_english_strictly_and_generates(english_model_dir: Path, tmp_path: Path):
    _assert_reference_agrees(_reference_check(english_model_dir, "english", tmp_path), "english")
