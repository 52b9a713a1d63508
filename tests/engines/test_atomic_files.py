from __future__ import annotations

import os
import stat
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


def _staged(tmp_path: Path, new_file: str, old_file: str | None = None) -> tuple[Path, Path]:
    """A staging directory holding ``new_file``, and the destination ``model``,
    which exists holding ``old_file`` when one is named."""
    dest = tmp_path / "model"
    if old_file is not None:
        dest.mkdir()
        (dest / old_file).write_text("old")
    staging = tmp_path / ".staging"
    staging.mkdir()
    (staging / new_file).write_text("new")
    return staging, dest


def test_replace_dir_swaps_a_whole_tree(tmp_path: Path):
    staging, dest = _staged(tmp_path, "model.safetensors", old_file="stale")
    replace_dir(staging, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["model.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_replace_dir_into_a_new_place(tmp_path: Path):
    staging, dest = _staged(tmp_path, "a")
    replace_dir(staging, dest)
    assert (dest / "a").read_text() == "new" and not staging.exists()


def test_replace_dir_never_leaves_the_destination_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    staging, dest = _staged(tmp_path, "new.bin", old_file="old.bin")
    seen: list[bool] = []  # does dest exist at each rename?
    real_rename = os.rename

    def watching_rename(src, dst):
        seen.append(dest.exists())
        real_rename(src, dst)
        seen.append(dest.exists())

    monkeypatch.setattr(os, "rename", watching_rename)
    replace_dir(staging, dest)
    assert all(seen)
    assert sorted(p.name for p in dest.iterdir()) == ["new.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


@pytest.mark.parametrize("how", ["file", "new dir", "replaced dir"])
def test_the_parent_directory_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str):
    synced_dirs: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced_dirs.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    if how == "file":
        write_bytes_atomically(tmp_path / "voice.bin", b"x")
    else:
        if how == "replaced dir":
            (tmp_path / "model").mkdir()
        staging = tmp_path / ".staging"
        staging.mkdir()
        replace_dir(staging, tmp_path / "model")
    assert synced_dirs == [str(tmp_path)]
