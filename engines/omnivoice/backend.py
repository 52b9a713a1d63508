"""The OmniVoice model behind the small interface the engine uses (``Backend``).

``load_backend`` finds the weights (a local directory, or a model id already in
the local Hugging Face cache: weights are never downloaded here), picks the
device and dtype, and loads the package's ``OmniVoice``. ``OmniBackend`` then
generates one sentence at a time and makes voice-clone prompts.

Not thread-safe: the engine's worker thread is its only caller.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engines.missing import ModelMissing
from engines.omnivoice.prompts import PromptData
from engines.omnivoice.runtime import RuntimeMissing, dtype_for, import_omnivoice, pick_device

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "k2-fsa/OmniVoice"
DEFAULT_ASR_ID = "openai/whisper-large-v3-turbo"  # what the package transcribes clips with


class Backend(Protocol):
    sample_rate: int
    fingerprint: str  # changes when the audio codes a clip maps to would change
    can_transcribe: bool
    device: str

    def generate(self, text: str, *, prompt: PromptData | None, instruct: str | None, language: str | None,
                 seed: int | None) -> np.ndarray:
        """One sentence as float32 mono samples at ``sample_rate``."""
        ...

    def make_prompt(self, audio: np.ndarray, rate: int, transcript: str | None) -> PromptData:
        """A voice-clone prompt from mono float32 ``audio``; transcribes it when ``transcript`` is None."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LoadSpec:
    model: str  # a directory, or a model id looked up in the local Hugging Face cache
    device: str = "auto"
    asr_model: str | None = None  # a Whisper directory or id; None: the package's default, if cached
    num_step: int = 32


def download_hint(target: str) -> str:
    return (f"download it with `hf download {DEFAULT_MODEL_ID} --local-dir {target}` (pip install huggingface_hub) "
            f"or set VOXGATE_OMNIVOICE_MODEL to a directory that holds it")


def resolve_local(model: str) -> Path | None:
    """``model`` as a local directory: itself, or its snapshot in the local Hugging Face cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or model.count("/") != 1:
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # not cached (or huggingface_hub missing): not on this machine
        return None


def check_model_dir(path: Path) -> None:
    """``ModelMissing`` unless ``path`` has the files ``OmniVoice.from_pretrained`` reads offline."""
    hint = download_hint(str(path))
    for name in ("config.json", "audio_tokenizer/config.json"):
        if not (path / name).is_file():
            raise ModelMissing(f"OmniVoice model files not found: {path / name}", hint)
    for folder in (path, path / "audio_tokenizer"):
        if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
            raise ModelMissing(f"OmniVoice weights not found in {folder} (no *.safetensors)", hint)


def fingerprint_of(path: Path) -> str:
    """What a clip's prompt depends on: the audio tokenizer's config and weights (size, mtime)."""
    digest = hashlib.sha256()
    tokenizer = path / "audio_tokenizer"
    digest.update((tokenizer / "config.json").read_bytes())
    for weights in sorted(tokenizer.glob("*.safetensors")):
        stat = weights.stat()
        digest.update(f"{weights.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def load_backend(spec: LoadSpec) -> OmniBackend:
    """Load the model of ``spec``. Raises ``RuntimeMissing`` (a package or the device),
    ``ModelMissing`` (the files), or whatever loading itself raised."""
    omnivoice = import_omnivoice()
    path = resolve_local(spec.model)
    if path is None:
        target = spec.model if "/" not in spec.model or Path(spec.model).is_absolute() else "DIR"
        raise ModelMissing(f"OmniVoice model {spec.model!r} is not on this machine (not a directory, not in "
                             "the local Hugging Face cache)", download_hint(target))
    check_model_dir(path)
    device = pick_device(spec.device)
    dtype = dtype_for(device)
    model = omnivoice.OmniVoice.from_pretrained(str(path), dtype=dtype, device_map=device)
    asr = resolve_local(spec.asr_model or DEFAULT_ASR_ID)
    if asr is not None:
        model._asr_model_name = str(asr)  # the package then loads it from disk when a clip needs a transcript
    log.info("OmniVoice loaded from %s on %s (%s)%s", path, device, str(dtype).replace("torch.", ""),
             f"; clips are transcribed with {asr}" if asr else "")
    return OmniBackend(model, device=device, fingerprint=fingerprint_of(path), can_transcribe=asr is not None,
                       num_step=spec.num_step)


class OmniBackend:
    """``Backend`` over a loaded ``omnivoice.OmniVoice``."""

    def __init__(self, model: Any, *, device: str, fingerprint: str, can_transcribe: bool, num_step: int) -> None:
        import torch
        from omnivoice import VoiceClonePrompt

        self._torch, self._prompt_class = torch, VoiceClonePrompt
        self.model, self.device, self.fingerprint = model, device, fingerprint
        self.can_transcribe, self.num_step = can_transcribe, num_step
        self.sample_rate = int(model.sampling_rate)

    def generate(self, text: str, *, prompt: PromptData | None, instruct: str | None, language: str | None,
                 seed: int | None) -> np.ndarray:
        torch = self._torch
        if seed is not None:
            torch.manual_seed(seed)
        native = None
        if prompt is not None:
            native = self._prompt_class(ref_audio_tokens=torch.from_numpy(np.asarray(prompt.codes, dtype=np.int64)),
                                        ref_text=prompt.ref_text, ref_rms=prompt.ref_rms)
        (audio,) = self.model.generate(text, language=language, voice_clone_prompt=native, instruct=instruct,
                                       num_step=self.num_step)
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def make_prompt(self, audio: np.ndarray, rate: int, transcript: str | None) -> PromptData:
        torch = self._torch
        wav = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32).reshape(1, -1))
        native = self.model.create_voice_clone_prompt((wav, rate), ref_text=transcript)
        codes = native.ref_audio_tokens.detach().to("cpu").numpy().astype(np.int64)
        return PromptData(codes=codes, ref_text=str(native.ref_text), ref_rms=float(native.ref_rms))

    def close(self) -> None:
        self.model = None
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()


@dataclass(frozen=True)
class PackageChecks:
    """Request checks that need the package but not the loaded model (they survive an idle unload)."""

    language_ids: frozenset[str]
    language_names: dict[str, str]  # lower-case name -> id
    check_instruct: Any  # the package's instruct normaliser (raises ValueError), or None

    def language(self, value: str) -> str | None:
        """The package's id for a language code or English name; None when it knows neither."""
        if value in self.language_ids:
            return value
        low = value.strip().lower()
        if low in self.language_ids:
            return low
        return self.language_names.get(low)


def package_checks() -> PackageChecks:
    import_omnivoice()
    from omnivoice.utils.lang_map import LANG_IDS, LANG_NAME_TO_ID

    try:
        from omnivoice.models.omnivoice import _resolve_instruct as check_instruct
    except ImportError:  # another package layout: the model then reports a bad instruct itself
        check_instruct = None
    return PackageChecks(frozenset(LANG_IDS), {str(k).lower(): v for k, v in LANG_NAME_TO_ID.items()},
                         check_instruct)


__all__ = [
    "Backend",
    "LoadSpec",
    "ModelMissing",
    "OmniBackend",
    "PackageChecks",
    "RuntimeMissing",
    "load_backend",
    "package_checks",
]
