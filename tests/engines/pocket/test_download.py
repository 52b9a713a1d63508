"""``pull_model`` against a local HTTP server serving a random tiny model directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engines.pocket.download import DEFAULT_FILES, DownloadError, RemoteFile, pull_model

SERVED = ("model.safetensors", "tokenizer.model", "embeddings/alba.safetensors", "embeddings/marius.safetensors")


@dataclass
class Behaviour:
    support_range: bool = True
    drop_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before cutting, once each
    drop_always: set[str] = field(default_factory=set)  # path -> cut every response half-way
    status: dict[str, int] = field(default_factory=dict)  # path -> forced HTTP status
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)


class ModelServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.behaviour = Behaviour()
        behaviour_of = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:
                b = behaviour_of.behaviour
                path = self.path.removeprefix("/model/")
                b.requests.append((path, self.headers.get("Range")))
                if path in b.status:
                    self.send_error(b.status[path])
                    return
                file = behaviour_of.root / path
                if not file.is_file():
                    self.send_error(404)
                    return
                data = file.read_bytes()
                start = 0
                rng = self.headers.get("Range")
                if rng and b.support_range:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                cut = b.drop_after.pop(path, None)
                if path in b.drop_always:
                    cut = len(body) // 2
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="model-server", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/model"


@pytest.fixture
def server(tiny_model_dir: Path) -> Iterator[ModelServer]:
    srv = ModelServer(tiny_model_dir)
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
        srv.thread.join(timeout=5)


def _assert_same_tree(got: Path, want: Path) -> None:
    assert sorted(p.relative_to(got).as_posix() for p in got.rglob("*") if p.is_file()) == sorted(SERVED)
    for rel in SERVED:
        assert (got / rel).read_bytes() == (want / rel).read_bytes(), rel


def test_normal_pull_gets_every_file_and_skips_voices_the_server_lacks(server: ModelServer, tmp_path: Path):
    dest = tmp_path / "pocket"
    pull_model(dest, base_url=server.base_url)
    _assert_same_tree(dest, server.root)
    assert [p.name for p in tmp_path.iterdir()] == ["pocket"]  # no staging left behind
    assert [path for path, _ in server.behaviour.requests] == [f.path for f in DEFAULT_FILES]


def test_interrupted_download_resumes_with_a_range_request(server: ModelServer, tmp_path: Path):
    server.behaviour.drop_after["model.safetensors"] = 100_000
    dest = tmp_path / "pocket"
    pull_model(dest, base_url=server.base_url)
    _assert_same_tree(dest, server.root)
    model_requests = [r for r in server.behaviour.requests if r[0] == "model.safetensors"]
    assert model_requests == [("model.safetensors", None), ("model.safetensors", "bytes=100000-")]


def test_resume_across_runs_after_a_failed_pull(server: ModelServer, tmp_path: Path):
    server.behaviour.drop_always.add("model.safetensors")
    dest = tmp_path / "pocket"
    with pytest.raises(DownloadError, match=r"could not download model.safetensors .* after 2 attempts.*resume"):
        pull_model(dest, base_url=server.base_url, attempts=2)
    assert not dest.exists()
    partial = tmp_path / ".pocket.download" / "model.safetensors.partial"
    assert partial.stat().st_size > 0
    server.behaviour.drop_always.clear()
    server.behaviour.requests.clear()
    pull_model(dest, base_url=server.base_url)
    _assert_same_tree(dest, server.root)
    first = server.behaviour.requests[0]
    assert first[0] == "model.safetensors" and first[1] is not None and first[1] != "bytes=0-"


def test_server_without_range_support_restarts_the_file_cleanly(server: ModelServer, tmp_path: Path):
    server.behaviour.support_range = False
    server.behaviour.drop_after["model.safetensors"] = 123_457
    dest = tmp_path / "pocket"
    pull_model(dest, base_url=server.base_url)
    _assert_same_tree(dest, server.root)  # not the first 123457 bytes twice
    model_requests = [r for r in server.behaviour.requests if r[0] == "model.safetensors"]
    assert model_requests == [("model.safetensors", None), ("model.safetensors", "bytes=123457-")]


def test_missing_required_file_fails_and_leaves_nothing_at_dest(server: ModelServer, tmp_path: Path):
    server.behaviour.status["tokenizer.model"] = 404
    dest = tmp_path / "pocket"
    with pytest.raises(DownloadError, match=r"could not download tokenizer.model: .*/model/tokenizer.model "
                                            r"answered HTTP 404"):
        pull_model(dest, base_url=server.base_url)
    assert not dest.exists()


def test_wrong_checksum_is_refused_and_the_file_removed(server: ModelServer, tmp_path: Path):
    files = [RemoteFile("tokenizer.model", sha256="0" * 64)]
    dest = tmp_path / "pocket"
    with pytest.raises(DownloadError, match=r"tokenizer.model: sha256 [0-9a-f]{64} does not match the expected 0{64}"):
        pull_model(dest, base_url=server.base_url, files=files)
    assert not dest.exists()
    assert list((tmp_path / ".pocket.download").rglob("*.model*")) == []


def test_right_checksum_and_size_are_accepted(server: ModelServer, tmp_path: Path):
    data = (server.root / "tokenizer.model").read_bytes()
    files = [RemoteFile("tokenizer.model", size=len(data), sha256=hashlib.sha256(data).hexdigest())]
    pull_model(tmp_path / "pocket", base_url=server.base_url, files=files)
    assert (tmp_path / "pocket" / "tokenizer.model").read_bytes() == data


def test_wrong_size_is_refused(server: ModelServer, tmp_path: Path):
    files = [RemoteFile("tokenizer.model", size=5)]
    with pytest.raises(DownloadError):
        pull_model(tmp_path / "pocket", base_url=server.base_url, files=files, attempts=1)
    assert not (tmp_path / "pocket").exists()


def test_unreachable_server_names_the_file(tmp_path: Path):
    with pytest.raises(DownloadError, match=r"could not download model.safetensors from http://127.0.0.1:9/x/"
                                            r"model.safetensors after 1 attempts"):
        pull_model(tmp_path / "pocket", base_url="http://127.0.0.1:9/x", attempts=1, timeout_s=2)
    assert not (tmp_path / "pocket").exists()


def test_pull_replaces_an_existing_model_whole(server: ModelServer, tmp_path: Path):
    dest = tmp_path / "pocket"
    dest.mkdir()
    (dest / "stale.bin").write_bytes(b"x")
    pull_model(dest, base_url=server.base_url)
    _assert_same_tree(dest, server.root)


def _run_cli_pull(server: ModelServer, dest: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "VOXGATE_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "gateway.cli", "models", "pull", "pocket", "--dest", str(dest),
                           "--base-url", server.base_url], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_cli_models_pull_uses_the_base_url(server: ModelServer, tmp_path: Path):
    dest = tmp_path / "pocket"
    proc = _run_cli_pull(server, dest, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"Pocket TTS model is in {dest}\n"
    _assert_same_tree(dest, server.root)


def test_cli_models_pull_failure_is_one_clear_line(server: ModelServer, tmp_path: Path):
    server.behaviour.status["model.safetensors"] = 404
    dest = tmp_path / "pocket"
    proc = _run_cli_pull(server, dest, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("voxgate models pull: ") and "model.safetensors" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not dest.exists()
