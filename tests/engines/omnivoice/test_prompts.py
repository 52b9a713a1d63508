"""The prompt cache: file format, corruption handling, memory LRU and the bounded disk layer."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from engines.omnivoice.prompts import MAGIC, PromptCache, PromptData, decode_prompt, encode_prompt, prompt_key


def _prompt(n: int = 0) -> PromptData:
    return PromptData(codes=np.arange(24, dtype=np.int64).reshape(8, 3) + n, ref_text=f"words {n}.", ref_rms=0.25)


def _same(a: PromptData | None, b: PromptData) -> bool:
    return a is not None and np.array_equal(a.codes, b.codes) and a.ref_text == b.ref_text and a.ref_rms == b.ref_rms


def test_encode_decode_round_trip() -> None:
    prompt = PromptData(codes=np.array([[0, 1024], [7, 3]]), ref_text="Hé, \"quoted\"\nline.", ref_rms=0.0625)
    back = decode_prompt("k1", encode_prompt("k1", prompt))
    assert _same(back, prompt)
    assert back.codes.dtype == np.int64


def test_keys_separate_their_parts() -> None:
    assert prompt_key("ab", "c") != prompt_key("a", "bc")
    assert prompt_key("ab", "c") == prompt_key("ab", "c")
    assert len(prompt_key("x")) == 40


def _corrupt_variants(good: bytes) -> dict[str, bytes]:
    header_end = good.index(b"\n", len(MAGIC))
    return {
        "truncated payload": good[:-3],
        "bad magic": b"X" + good[1:],
        "no header line": MAGIC + b'{"version": 1',
        "header not json": MAGIC + b"{nope\n" + good[header_end + 1:],
        "other version": good.replace(b'"version": 1', b'"version": 2'),
        "flipped payload byte": good[:-1] + bytes([good[-1] ^ 0xFF]),
        "empty": b"",
    }


@pytest.mark.parametrize(("case", "message"), [
    ("truncated payload", "payload size does not match its shape"),
    ("bad magic", "not a prompt file"),
    ("no header line", "no header line"),
    ("header not json", "header is not JSON"),
    ("other version", "format version 2, expected 1"),
    ("flipped payload byte", "payload checksum mismatch"),
    ("empty", "not a prompt file"),
])
def test_decode_names_what_is_wrong(case: str, message: str) -> None:
    data = _corrupt_variants(encode_prompt("k", _prompt()))[case]
    with pytest.raises(ValueError, match=f"^{message}$"):
        decode_prompt("k", data)


def test_decode_refuses_a_file_made_for_another_key() -> None:
    with pytest.raises(ValueError, match="^made for another key$"):
        decode_prompt("other", encode_prompt("k", _prompt()))


def test_put_then_get_from_memory_then_from_disk_after_restart(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path)
    cache.put("k", _prompt(1))
    assert _same(cache.get("k"), _prompt(1))
    assert (cache.memory_hits, cache.disk_hits, cache.misses) == (1, 0, 0)
    restarted = PromptCache(tmp_path)
    assert _same(restarted.get("k"), _prompt(1))
    assert _same(restarted.get("k"), _prompt(1))
    assert (restarted.memory_hits, restarted.disk_hits, restarted.misses) == (1, 1, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.prompt"]  # no temporary files left behind


@pytest.mark.parametrize("case", ["truncated payload", "bad magic", "other version", "flipped payload byte", "empty"])
def test_a_corrupt_file_is_dropped_and_reported_as_a_miss(tmp_path: Path, case: str) -> None:
    PromptCache(tmp_path).put("k", _prompt())
    path = tmp_path / "k.prompt"
    path.write_bytes(_corrupt_variants(path.read_bytes())[case])
    cache = PromptCache(tmp_path)
    assert cache.get("k") is None
    assert not path.exists()
    assert (cache.misses, cache.dropped) == (1, 1)
    cache.put("k", _prompt(2))  # the caller rebuilds it
    assert _same(PromptCache(tmp_path).get("k"), _prompt(2))


def test_memory_layer_keeps_the_most_recently_used(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path, max_items=2)
    cache.put("k1", _prompt(1))
    cache.put("k2", _prompt(2))
    cache.get("k1")  # k1 is now more recent than k2
    cache.put("k3", _prompt(3))  # evicts k2 from memory
    for name in ("k1", "k3", "k2"):
        assert _same(cache.get(name), _prompt(int(name[1])))
    assert (cache.memory_hits, cache.disk_hits) == (3, 1)  # only k2 came back from disk


def test_disk_layer_is_bounded_and_evicts_the_least_recently_used(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path, max_items=1, max_files=3)
    for n in range(3):
        cache.put(f"k{n}", _prompt(n))
        os.utime(tmp_path / f"k{n}.prompt", ns=(n * 10**9, n * 10**9))
    assert _same(cache.get("k0"), _prompt(0))  # a read makes k0 the most recently used file
    cache.put("k3", _prompt(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k0.prompt", "k2.prompt", "k3.prompt"]


def test_discard_removes_both_layers(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path)
    cache.put("k", _prompt())
    cache.discard("k")
    assert cache.get("k") is None
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_directory_still_serves_from_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = PromptCache(blocker / "prompts")
    cache.put("k", _prompt())
    assert _same(cache.get("k"), _prompt())


def test_prompts_refuse_codes_outside_int16() -> None:
    with pytest.raises(ValueError, match="out of the int16 range"):
        encode_prompt("k", PromptData(codes=np.array([[70000]]), ref_text="", ref_rms=0.0))
