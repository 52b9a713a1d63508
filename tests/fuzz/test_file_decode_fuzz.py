"""Real small files of every accepted container, mutated (bytes flipped,
integers set to extremes, cut short, spliced; MP4 table counts aimed at on
purpose), posted to /v1/audio/transcriptions of the real app: the answer is
200, 400 ``bad_audio`` or 413 ``too_large``, never anything else, and no
decoder process's peak memory passes its loaded size plus its allowance."""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from tests.gateway.codecs.test_files import made
from tests.gateway.helpers import dictation_client
from tests.support.fake_sidecar import FakeSidecar
from tests.support.file_bombs import fragmented_mp4, honest_pcm_m4a

KINDS = ("wav", "flac", "mp3", "ogg-opus", "ogg-flac", "webm", "m4a", "mp4", "aac", "pcm-m4a", "fragmented-mp4")
MEMORY_MB = 256
PEAK_BOUND_KB = (MEMORY_MB + 128) * 1024  # the allowance, plus a loaded worker's resident size with room
TABLES = (b"stts", b"stsc", b"stsz", b"stco", b"co64", b"ctts", b"stss", b"trun", b"mdhd", b"tfhd", b"tkhd")
EXTREMES = (0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 30, 1 << 20, 65535)


@functools.cache
def seed(kind: str) -> bytes:
    if kind == "pcm-m4a":
        return honest_pcm_m4a(0.5)
    if kind == "fragmented-mp4":
        return fragmented_mp4(1.0)
    return made(kind, 0.5)


def mutation() -> st.SearchStrategy[tuple[str, int, int]]:
    """(what, where, value): ``where`` is reduced modulo the file's length,
    and half of the time aimed at its first kilobyte, where the headers are."""
    where = st.integers(0, 1023) | st.integers(0, 1 << 24)
    return st.tuples(st.sampled_from(["byte", "u32", "cut", "splice", "insert"]), where,
                     st.sampled_from(EXTREMES) | st.integers(0, 0xFFFFFFFF))


def mutate(data: bytes, mutations: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for what, where, value in mutations:
        if not out:
            break
        at = where % len(out)
        if what == "byte":
            out[at] = value & 0xFF
        elif what == "u32":
            out[at:at + 4] = struct.pack(">I", value)
        elif what == "cut":
            del out[at:]
        elif what == "splice":
            piece = out[at:at + 1 + value % 512]
            out[value % len(out):value % len(out)] = piece
        else:
            out[at:at] = value.to_bytes(4, "big") * (1 + value % 8)
    return bytes(out)


def aim_at_tables(data: bytes, picks: list[tuple[int, int, int]]) -> bytes:
    """Overwrite a 32-bit field a few bytes after a table's name (its flags, count or first entry)."""
    out = bytearray(data)
    places = [i for name in TABLES for i in _find_all(data, name)]
    for pick, offset, value in picks:
        if places:
            at = places[pick % len(places)] + 4 + 4 * (offset % 4)
            out[at:at + 4] = struct.pack(">I", value)
    return bytes(out)


def _find_all(data: bytes, needle: bytes) -> Iterator[int]:
    at = data.find(needle)
    while at != -1:
        yield at
        at = data.find(needle, at + 1)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    fake = FakeSidecar(transcription={"text": "x"})
    with dictation_client(tmp_path_factory.mktemp("fuzz"), fake, decode_memory_mb=MEMORY_MB, decode_cpu_s=10) as c:
        yield c


def post_and_check(client: TestClient, data: bytes) -> None:
    r = client.post("/v1/audio/transcriptions", files={"file": ("a", data, "application/octet-stream")})
    assert r.status_code in (200, 400, 413), (r.status_code, r.text)
    if r.status_code != 200:
        assert r.json()["code"] == ("bad_audio" if r.status_code == 400 else "too_large"), r.json()
    for pid in client.app_state["decoders"].pids:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        assert peak_kb < PEAK_BOUND_KB


@settings(max_examples=80)
@given(kind=st.sampled_from(KINDS), mutations=st.lists(mutation(), min_size=1, max_size=4))
def test_a_mutated_file_is_answered_200_or_400(client, kind, mutations):
    post_and_check(client, mutate(seed(kind), mutations))


@settings(max_examples=60)
@given(kind=st.sampled_from(["m4a", "mp4", "pcm-m4a", "fragmented-mp4"]),
       picks=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 3),
                                st.sampled_from(EXTREMES) | st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=3))
def test_an_mp4_with_mutated_table_counts_is_answered_200_or_400(client, kind, picks):
    post_and_check(client, aim_at_tables(seed(kind), picks))
