"""A voice is the flow LM's key/value cache after the voice prompt.

File layout (``embeddings/<voice>.safetensors``, as the reference exports it), for
every LM layer N:

- ``transformer.layers.N.self_attn/cache``: [2, 1, T, kv_heads, head_dim], keys and
  values with rope applied (float32 or bf16);
- ``transformer.layers.N.self_attn/offset``: int64 [1], the number of valid positions;
- ``transformer.layers.N.self_attn/pad``: int64 [1], always 0 (optional on read).

Older files carry ``.../current_end`` (its length is the offset) instead of ``offset``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import safetensors
import safetensors.torch
import torch

from engines.pocket.errors import PocketModelError, missing_file, shape_mismatch

_PREFIX = "transformer.layers.{}.self_attn"


@dataclass(frozen=True)
class VoiceState:
    """Per-layer keys and values [2, T, kv_heads, head_dim] of a voice prompt."""

    layers: tuple[torch.Tensor, ...]
    length: int

    @property
    def kv_heads(self) -> int:
        return self.layers[0].shape[2]

    @property
    def head_dim(self) -> int:
        return self.layers[0].shape[3]


def read_voice_layout(path: Path) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a voice file, without loading its tensors."""
    with safetensors.safe_open(str(path), framework="pt") as f:
        keys = list(f.keys())
        layers = sum(1 for k in keys if k.endswith("/cache"))
        if not layers:
            raise PocketModelError(f"{path}: no '{_PREFIX.format(0)}/cache' tensor: not a voice file",
                                   path=str(path))
        shape = f.get_slice(f"{_PREFIX.format(0)}/cache").get_shape()
    if len(shape) != 5:
        raise PocketModelError(f"{path}: tensor '{_PREFIX.format(0)}/cache' has shape {shape}, "
                               "expected [2, 1, T, heads, head_dim]", path=str(path))
    return layers, shape[3], shape[4]


def load_voice_file(path: str | Path, layers: int, kv_heads: int, head_dim: int) -> VoiceState:
    """Read a voice file and check it against the model's layers and head layout."""
    path = Path(path)
    if not path.is_file():
        raise missing_file(str(path), "voice embedding")
    try:
        tensors = safetensors.torch.load_file(str(path))
    except Exception as exc:  # a truncated or foreign file
        raise PocketModelError(f"{path}: not a readable safetensors file ({exc})", path=str(path)) from exc
    kv: list[torch.Tensor] = []
    length = None
    for n in range(layers):
        prefix = _PREFIX.format(n)
        cache = tensors.get(f"{prefix}/cache")
        if cache is None:
            raise PocketModelError(f"{path}: missing tensor '{prefix}/cache' "
                                   f"(the model has {layers} layers)", path=str(path))
        if cache.dim() != 5:
            raise PocketModelError(f"{path}: tensor '{prefix}/cache' has shape {list(cache.shape)}, "
                                   f"expected [2, 1, T, {kv_heads}, {head_dim}]", path=str(path))
        expected = (2, 1, cache.shape[2], kv_heads, head_dim)
        if tuple(cache.shape) != expected:
            raise shape_mismatch(str(path), f"{prefix}/cache", expected, tuple(cache.shape))
        if f"{prefix}/offset" in tensors:
            offset = int(tensors[f"{prefix}/offset"].view(-1)[0])
        elif f"{prefix}/current_end" in tensors:
            offset = tensors[f"{prefix}/current_end"].shape[0]
        else:
            raise PocketModelError(f"{path}: missing tensor '{prefix}/offset'", path=str(path))
        pad = tensors.get(f"{prefix}/pad")
        if pad is not None and bool((pad != 0).any()):
            raise PocketModelError(f"{path}: '{prefix}/pad' is not 0: a batched state, not a voice",
                                   path=str(path))
        if not 0 < offset <= cache.shape[2] or (length is not None and offset != length):
            raise PocketModelError(f"{path}: '{prefix}/offset' is {offset}, expected 1..{cache.shape[2]}"
                                   " and equal in every layer", path=str(path))
        length = offset
        kv.append(cache[:, 0, :offset].to(torch.float32).contiguous())
    extra = sum(1 for k in tensors if k.endswith("/cache")) - layers
    if extra:
        raise PocketModelError(f"{path}: has {layers + extra} layers of cache, the model has {layers}",
                               path=str(path))
    assert length is not None
    return VoiceState(layers=tuple(kv), length=length)


def save_voice_file(voice: VoiceState, path: str | Path) -> None:
    """Write ``voice`` in the shipped layout (readable by the reference too)."""
    out: dict[str, torch.Tensor] = {}
    for n, kv in enumerate(voice.layers):
        prefix = _PREFIX.format(n)
        out[f"{prefix}/offset"] = torch.tensor([voice.length], dtype=torch.long)
        out[f"{prefix}/pad"] = torch.zeros(1, dtype=torch.long)
        out[f"{prefix}/cache"] = kv[:, None].contiguous()
    safetensors.torch.save_file(out, str(path))
