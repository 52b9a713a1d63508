"""Download the released Pocket TTS files into a model directory (explicit command only).

``pull_model`` is what ``voxgate models pull pocket`` runs; nothing calls it
implicitly. Every file is streamed into ``<staging>/<path>.partial``; a partial
left by an interrupted run is resumed with an HTTP ``Range`` request (a server
that ignores ``Range`` gets a clean restart of that file). A finished file is
checked against its expected size and sha256 when they are known (given in the
file list, or the ``X-Linked-Size`` / ``X-Linked-Etag`` headers Hugging Face
sends for large files) before it is renamed into place. Only when every
required file is complete is the staging directory renamed to ``dest``, so a
half-written model is never at ``dest``. The staging directory is a hidden
sibling of ``dest`` and survives a failure, so the next run resumes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from engines.base import EngineError
from engines.files import replace_dir

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = (
    "https://huggingface.co/kyutai/pocket-tts-without-voice-cloning/resolve/"
    "a7056f505a4a8ca72d8b5fb1440071d6f1a35739/languages/english"
)
CHUNK_BYTES = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RemoteFile:
    """One file of a model directory, relative to the base URL and to ``dest``."""

    path: str
    required: bool = True  # an optional file that the server does not have (404) is skipped
    size: int | None = None
    sha256: str | None = None


DEFAULT_VOICES = ("alba", "marius", "javert", "jean", "fantine", "cosette", "eponine", "azelma")
DEFAULT_FILES: tuple[RemoteFile, ...] = (
    RemoteFile("model.safetensors"),
    RemoteFile("tokenizer.model"),
    *(RemoteFile(f"embeddings/{voice}.safetensors", required=False) for voice in DEFAULT_VOICES),
)


class DownloadError(EngineError):
    code = "download_failed"


Progress = Callable[[str, int, int | None], None]  # (path, bytes done, total or None)


def pull_model(dest: Path, base_url: str = DEFAULT_BASE_URL, files: Sequence[RemoteFile] = DEFAULT_FILES, *,
               attempts: int = 4, timeout_s: float = 60.0, progress: Progress | None = None,
               transport: httpx.BaseTransport | None = None) -> None:
    """Download ``files`` from ``base_url`` into ``dest`` (see module doc).

    Raises DownloadError naming the file and why. ``attempts`` bounds the
    resumptions of one file within this call.
    """
    dest = Path(dest)
    staging = dest.parent / f".{dest.name}.download"
    staging.mkdir(parents=True, exist_ok=True)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 15.0))
    with httpx.Client(timeout=timeout, follow_redirects=True, transport=transport) as client:
        for remote in files:
            target = staging / remote.path
            if target.exists():
                continue  # completed and verified by an earlier run
            url = f"{base_url.rstrip('/')}/{remote.path}"
            fetched = _fetch_with_retries(client, url, remote, target, attempts, progress)
            if not fetched:
                log.info("skipping optional %s: not on the server", remote.path)
    missing = [f.path for f in files if f.required and not (staging / f.path).exists()]
    if missing:  # unreachable unless a file vanished under us; never publish an incomplete model
        raise DownloadError(f"model download incomplete, missing: {', '.join(missing)}")
    _publish(staging, dest)


def _fetch_with_retries(client: httpx.Client, url: str, remote: RemoteFile, target: Path, attempts: int,
                        progress: Progress | None) -> bool:
    last_error: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            return _fetch(client, url, remote, target, progress)
        except (httpx.TransportError, _Truncated) as exc:
            last_error = exc
            log.warning("download of %s interrupted (attempt %d of %d): %s", remote.path, attempt, attempts, exc)
    raise DownloadError(f"could not download {remote.path} from {url} after {attempts} attempts: {last_error}; "
                        "run the command again to resume")


class _Truncated(Exception):
    """The server ended the body before the announced length."""


def _fetch(client: httpx.Client, url: str, remote: RemoteFile, target: Path, progress: Progress | None) -> bool:
    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    have = partial.stat().st_size if partial.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 404 and not remote.required:
            return False
        if response.status_code == 416:
            partial.unlink(missing_ok=True)  # our partial is not a prefix of what the server has
            raise _Truncated(f"server refused to resume {remote.path} at byte {have}; restarting it")
        if response.status_code not in (200, 206):
            raise DownloadError(f"could not download {remote.path}: {url} answered HTTP {response.status_code}")
        if response.status_code == 200 or not _resumes_at(response, have):
            have = 0  # the server ignored Range: start the file over
        total = _expected_size(response, remote, have)
        mode = "ab" if have else "wb"
        with open(partial, mode) as out:
            done = have
            for chunk in response.iter_bytes():  # unbuffered: a cut keeps every byte received
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(remote.path, done, total)
    if total is not None and done < total:
        raise _Truncated(f"{remote.path}: got {done} of {total} bytes")
    _verify(partial, remote, total, _expected_sha256(response, remote))
    os.replace(partial, target)
    return True


def _resumes_at(response: httpx.Response, offset: int) -> bool:
    match = re.match(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("content-range", ""))
    return bool(match) and int(match.group(1)) == offset


def _expected_size(response: httpx.Response, remote: RemoteFile, offset: int) -> int | None:
    if remote.size is not None:
        return remote.size
    linked = response.headers.get("x-linked-size")
    if linked and linked.isdigit():
        return int(linked)
    whole = re.match(r"bytes \d+-\d+/(\d+)", response.headers.get("content-range", ""))
    if whole:
        return int(whole.group(1))
    length = response.headers.get("content-length")
    return offset + int(length) if length and length.isdigit() else None


def _expected_sha256(response: httpx.Response, remote: RemoteFile) -> str | None:
    if remote.sha256:
        return remote.sha256.lower()
    etag = response.headers.get("x-linked-etag", "").strip('"').lower()
    return etag if _SHA256.match(etag) else None


def _verify(partial: Path, remote: RemoteFile, size: int | None, sha256: str | None) -> None:
    found = partial.stat().st_size
    if size is not None and found != size:
        partial.unlink()
        raise DownloadError(f"{remote.path}: expected {size} bytes, got {found}; run the command again")
    if sha256 is not None:
        digest = hashlib.sha256()
        with open(partial, "rb") as f:
            for block in iter(lambda: f.read(CHUNK_BYTES), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            partial.unlink()
            raise DownloadError(f"{remote.path}: sha256 {digest.hexdigest()} does not match the expected "
                                f"{sha256}; the corrupt file was removed, run the command again")


def _publish(staging: Path, dest: Path) -> None:
    for leftover in staging.rglob("*.partial"):
        leftover.unlink()  # optional files that were skipped part-way
    replace_dir(staging, dest)

