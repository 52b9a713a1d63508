"""Importing the ``omnivoice`` package, and choosing its device and dtype.

torchaudio on PyPI is built against CUDA: its compiled extension needs
``libcudart`` and ``libtorch_cuda``, which a CPU build of torch does not ship,
so ``import torchaudio`` fails there with an ``OSError``. OmniVoice and the
transformers audio tokenizer use only ``torchaudio.functional.resample``, which
is plain torch code. When the extension cannot load, torchaudio's Python part
is imported without it (the same state torchaudio itself runs in when its
library file is absent); the compiled-only operators (``lfilter``, forced
alignment, CTC decoding) then raise, and nothing here calls them. With a CUDA
torch and its matching torchaudio the real package loads untouched.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types
import warnings
from typing import Any

log = logging.getLogger(__name__)

PACKAGE_HINT = "pip install 'voxgate[omnivoice]' (see docs/engines/omnivoice.md for the GPU install)"


class RuntimeMissing(Exception):
    """A package OmniVoice needs is not installed; the message names it."""


def _python_only_extension() -> types.ModuleType:
    """Stands in for ``torchaudio._extension`` when its compiled library cannot load."""
    stub = types.ModuleType("torchaudio._extension")

    def fail_if_no_align(func: Any) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("torchaudio forced alignment needs torchaudio's compiled extension")

        return refuse

    stub.PYTHON_ONLY = True  # type: ignore[attr-defined]
    stub._IS_TORCHAUDIO_EXT_AVAILABLE = False  # type: ignore[attr-defined]
    stub._IS_ALIGN_AVAILABLE = False  # type: ignore[attr-defined]
    stub.fail_if_no_align = fail_if_no_align  # type: ignore[attr-defined]
    stub._load_lib = lambda lib: False  # type: ignore[attr-defined]
    stub._check_cuda_version = lambda: None  # type: ignore[attr-defined]
    return stub


def import_torchaudio() -> str:
    """Import torchaudio; "native" when its extension loaded, "python-only" otherwise."""
    if importlib.util.find_spec("torchaudio") is None:
        raise RuntimeMissing("the package torchaudio is not installed")
    try:
        import torchaudio
    except OSError as exc:
        reason = str(exc)
    else:
        extension = sys.modules.get("torchaudio._extension")
        return "python-only" if getattr(extension, "PYTHON_ONLY", False) else "native"
    for name in [n for n in sys.modules if n == "torchaudio" or n.startswith("torchaudio.")]:
        del sys.modules[name]
    sys.modules["torchaudio._extension"] = _python_only_extension()
    import torchaudio  # noqa: F401

    log.warning("torchaudio's compiled extension does not load with this torch (%s); using its Python part "
                "only (OmniVoice needs nothing else)", reason)
    return "python-only"


def import_omnivoice() -> Any:
    """The ``omnivoice`` module, or ``RuntimeMissing`` naming what is not installed."""
    for name in ("torch", "transformers", "omnivoice"):
        if importlib.util.find_spec(name) is None:
            raise RuntimeMissing(f"the package {name} is not installed")
    # Import-time warnings of these packages (pydub's audioop deprecation, its missing
    # ffmpeg, transformers' notices) are theirs, not this process's: keep them quiet.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import_torchaudio()
        import omnivoice
        import pydub  # noqa: F401  (imported by omnivoice's audio helpers; warns once)
    return omnivoice


def pick_device(wanted: str) -> str:
    """The torch device for ``wanted`` ("auto": cuda, then mps, then cpu).

    Raises ``RuntimeMissing`` when an explicit accelerator is not usable here.
    """
    import torch

    if wanted == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if wanted.startswith("cuda"):
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise RuntimeMissing(f"VOXGATE_DEVICE={wanted} but no CUDA device is usable (torch "
                                 f"{torch.__version__} is {build})")
        index = int(wanted.split(":", 1)[1]) if ":" in wanted else 0
        if index >= torch.cuda.device_count():
            raise RuntimeMissing(f"VOXGATE_DEVICE={wanted} but this machine has {torch.cuda.device_count()} "
                                 "CUDA device(s)")
        return wanted
    if wanted == "mps":
        if getattr(torch.backends, "mps", None) is None or not torch.backends.mps.is_available():
            raise RuntimeMissing("VOXGATE_DEVICE=mps but Apple's Metal backend is not available here")
        return "mps"
    return "cpu"


def dtype_for(device: str) -> Any:
    """fp16 on a GPU, fp32 on the CPU (fp16 matmuls there are slow or missing)."""
    import torch

    return torch.float32 if device == "cpu" else torch.float16
