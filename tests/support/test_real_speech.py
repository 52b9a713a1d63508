"""The real-speech cache takes a recording only when its bytes are the pinned ones."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tests.support.real_speech import FetchError, GithubFile, Recording, fetch

CONTENT = b"RIFF not really a wav, but bytes whose hash is pinned"


def git_copy(tmp_path: Path) -> tuple[Path, str]:
    """A one-commit repository holding ``speech/clip.wav``; its git dir and commit."""
    work = tmp_path / "repo"
    (work / "speech").mkdir(parents=True)
    (work / "speech" / "clip.wav").write_bytes(CONTENT)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(tmp_path)}
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "clip"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, timeout=30)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, env=env, check=True, capture_output=True,
                            text=True, timeout=30).stdout.strip()
    return work / ".git", commit


def recording(commit: str, sha256: str) -> Recording:
    return Recording("clip", "someone", "the words", sha256, GithubFile("owner/name", commit, "speech/clip.wav"))


def test_a_recording_is_fetched_once_into_the_cache(tmp_path):
    git_dir, commit = git_copy(tmp_path)
    pinned = recording(commit, hashlib.sha256(CONTENT).hexdigest())
    path = fetch(pinned, tmp_path / "cache", {"owner/name": git_dir})
    assert path == tmp_path / "cache" / "clip.wav"
    assert path.read_bytes() == CONTENT
    # from the cache now: no source is needed any more
    assert fetch(pinned, tmp_path / "cache", {}) == path


def test_a_damaged_cached_file_is_fetched_again(tmp_path):
    git_dir, commit = git_copy(tmp_path)
    pinned = recording(commit, hashlib.sha256(CONTENT).hexdigest())
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "clip.wav").write_bytes(CONTENT[:10])
    assert fetch(pinned, tmp_path / "cache", {"owner/name": git_dir}).read_bytes() == CONTENT


def test_bytes_that_are_not_the_pinned_ones_are_refused_and_not_cached(tmp_path):
    git_dir, commit = git_copy(tmp_path)
    with pytest.raises(FetchError) as caught:
        fetch(recording(commit, "0" * 64), tmp_path / "cache", {"owner/name": git_dir})
    assert str(caught.value) == (f"clip: the fetched file is not the pinned one "
                                 f"(sha256 {hashlib.sha256(CONTENT).hexdigest()})")
    assert not (tmp_path / "cache" / "clip.wav").exists()


def test_a_path_missing_at_the_commit_is_a_clear_error(tmp_path):
    git_dir, commit = git_copy(tmp_path)
    missing = Recording("clip", "someone", "the words", "0" * 64, GithubFile("owner/name", commit, "speech/none.wav"))
    with pytest.raises(FetchError, match=f"git show {commit}:speech/none.wav in {git_dir}: fatal: path "):
        fetch(missing, tmp_path / "cache", {"owner/name": git_dir})
