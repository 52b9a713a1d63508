from __future__ import annotations

from pathlib import Path

import pytest

from engines.files import replace_dir, write_atomically, write_bytes_atomically


def test_write_bytes_atomically_replaces_and_leaves_no_temp(tmp_path: Path):
    target = tmp_path / "sub" / "voice.bin"
    write_bytes_atomically(target, b"one")
    write_bytes_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["voice.bin"]


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path: Path):
    target = tmp_path / "voice.bin"
    target.write_bytes(b"old")

    def failing(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, failing)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["voice.bin"]


def test_replace_dir_swaps_a_whole_tree(tmp_path: Path):
    dest = tmp_path / "model"
    dest.mkdir()
    (dest / "stale").write_text("x")
    staging = tmp_path / ".staging"
    staging.mkdir()
    (staging / "model.safetensors").write_text("new")
    replace_dir(staging, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_replace_dir_into_a_new_place(tmp_path: Path):
    staging = tmp_path / ".staging"
    staging.mkdir()
    (staging / "a").write_text("1")
    replace_dir(staging, tmp_path / "model")
    assert (tmp_path / "model" / "a").read_text() == "1" and not staging.exists()
