"""Hypothesis strategies for what clients send: JSON of any shape (deeply nested
too), message-shaped objects with wrong field types, query strings, WAV headers."""

from __future__ import annotations

import json
import struct
from typing import Any

from hypothesis import strategies as st

TEXTS = st.text(max_size=60)
SCALARS = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | \
    st.floats(allow_nan=False, allow_infinity=False) | TEXTS
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
                           max_leaves=12)


def deep_nesting() -> st.SearchStrategy[str]:
    """Arrays nested past the JSON parser's recursion limit, yet under every message
    size limit (so the answer is about nesting, not size). Hypothesis raises the
    recursion limit by about 2000 while a test runs, so the depth starts past that."""
    return st.integers(min_value=3500, max_value=5500).map(lambda n: "[" * n + "]" * n)


def messages(types: list[str]) -> st.SearchStrategy[str]:
    """Text messages a client could send: objects with a known or unknown ``type``
    and fields of every type, bare JSON values, deep nesting and non-JSON."""
    typed = st.builds(lambda t, extra: json.dumps({**extra, "type": t}),
                      st.sampled_from(types) | TEXTS | JSON_VALUES,
                      st.dictionaries(st.sampled_from(["text", "id", "voice", "seed", "x"]) | TEXTS, JSON_VALUES,
                                      max_size=4))
    return typed | JSON_VALUES.map(json.dumps) | deep_nesting() | st.text(max_size=80)


def queries(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    values = st.text(max_size=24) | st.integers(min_value=-(10**12), max_value=10**12).map(str) | \
        st.sampled_from(["", "true", "0", "pcm_s16le", "pcm_f32le", "auto", "en", "8000", "48000", "1e3", "nan"])
    return st.dictionaries(st.sampled_from(names) | st.text(max_size=8), values, max_size=len(names) + 1)


def wav_files() -> st.SearchStrategy[bytes]:
    """RIFF/WAVE files whose header fields take any value, with any payload."""
    def build(tag: int, channels: int, rate: int, bits: int, data: bytes, declared: int | None,
              extra_chunk: bool) -> bytes:
        block = max(1, channels * bits // 8) & 0xFFFF
        fmt = struct.pack("<HHIIHH", tag, channels, rate, (rate * block) & 0xFFFFFFFF, block, bits)
        chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
        if extra_chunk:
            chunks += b"LIST" + struct.pack("<I", 3) + b"abc\0"
        size = len(data) if declared is None else declared
        chunks += b"data" + struct.pack("<I", size) + data
        return b"RIFF" + struct.pack("<I", (4 + len(chunks)) & 0xFFFFFFFF) + b"WAVE" + chunks

    return st.builds(build, st.sampled_from([1, 3, 2, 0xFFFE, 0]) | st.integers(0, 0xFFFF),
                     st.integers(0, 0xFFFF), st.sampled_from([1, 8000, 16000, 48000, 48001, 0]) | st.integers(0, 2**32 - 1),
                     st.sampled_from([8, 16, 24, 32, 64, 0, 7]), st.binary(max_size=512),
                     st.none() | st.integers(0, 2**32 - 1), st.booleans())


def any_json(value: Any) -> str:
    return json.dumps(value)
