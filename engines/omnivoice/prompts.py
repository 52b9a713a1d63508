"""Voice-clone prompts and their two-layer cache.

A prompt is what OmniVoice makes of a reference clip: the clip's audio codes
(quantizers x frames), its transcript and its loudness. Making one runs the
audio tokenizer's encoder (and maybe a Whisper transcription), so prompts are
kept in a memory LRU and on disk, where they survive a restart: the first
request after one skips the encode.

Disk format, version 1 (one file per prompt, ``<key>.prompt``)::

    b"VOXGATE-OMNIVOICE-PROMPT\\n"
    one JSON line: {"version": 1, "key", "shape": [C, T], "ref_text", "ref_rms", "sha256"}
    C*T little-endian int16 codes (codes are < 1025)

Files are written atomically (temp file, fsync, rename). A file that does not
parse, has another version or key, or whose payload fails its checksum is
deleted and reported as a miss, so the caller rebuilds it. The directory holds
at most ``max_files`` prompts; the least recently used go first (reads touch a
file's mtime).

Thread-safety: every method takes the cache's lock; the engine calls it from
its worker thread and, for deletions, from the event loop.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.files import write_bytes_atomically

log = logging.getLogger(__name__)

MAGIC = b"VOXGATE-OMNIVOICE-PROMPT\n"
FORMAT_VERSION = 1
SUFFIX = ".prompt"


@dataclass(frozen=True)
class PromptData:
    """A voice-clone prompt, independent of torch and of the package's own class."""

    codes: np.ndarray  # int, [quantizers, frames]
    ref_text: str
    ref_rms: float


def prompt_key(*parts: str) -> str:
    """A file-name-safe key for the prompt made from ``parts`` (model fingerprint, clip hash, ...)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:40]


def encode_prompt(key: str, prompt: PromptData) -> bytes:
    codes = np.asarray(prompt.codes)
    if codes.ndim != 2 or codes.size == 0:
        raise ValueError(f"prompt codes must be a non-empty [quantizers, frames] array, got shape {codes.shape}")
    if codes.min() < 0 or codes.max() > np.iinfo(np.int16).max:
        raise ValueError("prompt codes out of the int16 range")
    payload = codes.astype("<i2").tobytes()
    header = {"version": FORMAT_VERSION, "key": key, "shape": list(codes.shape), "ref_text": prompt.ref_text,
              "ref_rms": float(prompt.ref_rms), "sha256": hashlib.sha256(payload).hexdigest()}
    return MAGIC + json.dumps(header, ensure_ascii=True).encode("ascii") + b"\n" + payload


def decode_prompt(key: str, data: bytes) -> PromptData:
    """The prompt in ``data``; ``ValueError`` saying what is wrong with it."""
    if not data.startswith(MAGIC):
        raise ValueError("not a prompt file")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise ValueError("no header line")
    try:
        header = json.loads(data[len(MAGIC):end])
    except ValueError:
        raise ValueError("header is not JSON") from None
    if not isinstance(header, dict) or header.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {header.get('version') if isinstance(header, dict) else None!r}, "
                         f"expected {FORMAT_VERSION}")
    if header.get("key") != key:
        raise ValueError("made for another key")
    shape, payload = header.get("shape"), data[end + 1:]
    if (not isinstance(shape, list) or len(shape) != 2 or not all(isinstance(n, int) and n > 0 for n in shape)
            or shape[0] * shape[1] * 2 != len(payload)):
        raise ValueError("payload size does not match its shape")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise ValueError("payload checksum mismatch")
    ref_text, ref_rms = header.get("ref_text"), header.get("ref_rms")
    if not isinstance(ref_text, str) or not isinstance(ref_rms, (int, float)):
        raise ValueError("ref_text or ref_rms missing")
    codes = np.frombuffer(payload, dtype="<i2").astype(np.int64).reshape(shape)
    return PromptData(codes=codes, ref_text=ref_text, ref_rms=float(ref_rms))


class PromptCache:
    """Memory LRU over a bounded directory of prompt files (see the module docstring)."""

    def __init__(self, directory: Path, max_items: int = 64, max_files: int = 256) -> None:
        if max_items < 1 or max_files < 1:
            raise ValueError("max_items and max_files must be at least 1")
        self.directory = Path(directory)
        self.max_items, self.max_files = max_items, max_files
        self._memory: OrderedDict[str, PromptData] = OrderedDict()
        self._lock = threading.Lock()
        self.memory_hits = self.disk_hits = self.misses = self.dropped = 0

    def path(self, key: str) -> Path:
        return self.directory / f"{key}{SUFFIX}"

    def get(self, key: str) -> PromptData | None:
        with self._lock:
            prompt = self._memory.get(key)
            if prompt is not None:
                self._memory.move_to_end(key)
                self.memory_hits += 1
                return prompt
            prompt = self._read(key)
            if prompt is None:
                self.misses += 1
                return None
            self.disk_hits += 1
            self._remember(key, prompt)
            return prompt

    def put(self, key: str, prompt: PromptData) -> None:
        data = encode_prompt(key, prompt)
        with self._lock:
            self._remember(key, prompt)
            try:
                write_bytes_atomically(self.path(key), data)
            except OSError as exc:  # the memory layer still serves it; the next restart re-encodes
                log.warning("cannot write voice prompt %s: %s", self.path(key), exc)
                return
            self._evict_files()

    def discard(self, key: str) -> None:
        with self._lock:
            self._memory.pop(key, None)
            self.path(key).unlink(missing_ok=True)

    def _remember(self, key: str, prompt: PromptData) -> None:
        self._memory[key] = prompt
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_items:
            self._memory.popitem(last=False)

    def _read(self, key: str) -> PromptData | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read voice prompt %s: %s", path, exc)
            return None
        try:
            prompt = decode_prompt(key, data)
        except ValueError as exc:
            log.warning("dropping corrupt voice prompt %s (%s); it will be rebuilt", path, exc)
            self.dropped += 1
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used: last to be evicted
        return prompt

    def _evict_files(self) -> None:
        files = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            try:
                files.append((path.stat().st_mtime_ns, path.name, path))
            except FileNotFoundError:
                continue
        files.sort()
        for _, _, path in files[: max(0, len(files) - self.max_files)]:
            path.unlink(missing_ok=True)
