"""Finding Piper voices: voice directories, the bundled package, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.piper.voices import VoiceConfigError, bundled_voices, directory_voices, find_voices, read_voice


def write_voice(directory: Path, name: str, rate: int = 16000, language: str = "de_DE", config_name: str | None = None,
                speakers: dict | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    model = directory / f"{name}.onnx"
    model.write_bytes(b"not a real model")
    config = {"audio": {"sample_rate": rate}, "language": {"code": language}, "espeak": {"voice": "de"}}
    if speakers:
        config["speaker_id_map"] = speakers
    (directory / (config_name or f"{name}.onnx.json")).write_text(json.dumps(config))
    return model


def test_a_directory_voice_is_read_from_its_config(tmp_path):
    model = write_voice(tmp_path, "de_DE-thorsten-low", speakers={"b": 1, "a": 0})
    voice = read_voice(model, source=str(tmp_path))
    assert (voice.id, voice.sample_rate, voice.language, voice.speakers) == ("de_DE-thorsten-low", 16000, "de",
                                                                              ("a", "b"))
    assert voice.config == tmp_path / "de_DE-thorsten-low.onnx.json"


def test_a_config_named_like_the_stem_is_found(tmp_path):
    model = write_voice(tmp_path, "x", config_name="x.json")
    assert read_voice(model, "d").config == tmp_path / "x.json"


def test_problems_are_reported_and_good_voices_kept(tmp_path):
    write_voice(tmp_path / "voices", "good")
    (tmp_path / "voices" / "orphan.onnx").write_bytes(b"")
    (tmp_path / "voices" / "broken.onnx").write_bytes(b"")
    (tmp_path / "voices" / "broken.onnx.json").write_text("{not json")
    voices, problems = directory_voices([tmp_path / "voices", tmp_path / "absent"])
    assert [v.id for v in voices] == ["good"]
    assert problems[0].startswith(f"{tmp_path / 'voices' / 'broken.onnx.json'}: not a Piper voice config")
    assert problems[1] == f"{tmp_path / 'voices' / 'orphan.onnx'}: no config next to it (orphan.onnx.json or orphan.json)"
    assert problems[2] == f"{tmp_path / 'absent'}: not a directory"


def test_an_out_of_range_rate_is_refused(tmp_path):
    model = write_voice(tmp_path, "odd", rate=96000)
    with pytest.raises(VoiceConfigError, match="audio.sample_rate 96000 is out of range"):
        read_voice(model, "d")


def test_the_bundled_voice_package_is_found():
    (voice,) = bundled_voices()
    assert (voice.id, voice.sample_rate, voice.language, voice.source) == ("en_US-joe-medium", 22050, "en", "bundled")
    assert voice.model.is_file()


def test_missing_voice_packages_are_skipped():
    assert bundled_voices(["no_such_voice_package_here"]) == []


def test_a_directory_voice_of_the_bundled_name_replaces_it(tmp_path):
    write_voice(tmp_path, "en_US-joe-medium", rate=16000)
    write_voice(tmp_path, "other")
    voices, problems = find_voices([tmp_path])
    assert sorted(voices) == ["en_US-joe-medium", "other"]
    assert voices["en_US-joe-medium"].source == str(tmp_path)
    assert problems == []
