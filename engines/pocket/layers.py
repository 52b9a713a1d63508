"""Transformer building blocks shared by the flow LM and Mimi's transformers.

Attribute names follow the released checkpoint's keys (``self_attn.in_proj``,
``norm1``, ``linear1``, ``layer_scale_1.scale`` ...) so the file loads as is. Where a
cache lives (preallocated per-stream rows, a ring, nothing) is the caller's business:
a layer receives a :class:`KvStore` that appends the new keys and returns what to
attend to.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import nn
from torch.nn import functional as F

from engines.pocket.kernels import Linear


def rope_tables(positions: torch.Tensor, head_dim: int, max_period: float) -> torch.Tensor:
    """The rotation at ``positions`` [B, T] as unit complex numbers [B, T, 1, D/2] (float32 math).

    One forward computes them once and every layer's queries and keys use them.
    """
    b, t = positions.shape
    half = torch.arange(head_dim // 2, device=positions.device, dtype=torch.float32)
    freqs = torch.exp(half * (-math.log(max_period) * 2 / head_dim))
    angles = freqs * positions.to(torch.float32).view(b, t, 1, 1)  # [B, T, 1, D/2]
    return torch.complex(torch.cos(angles), torch.sin(angles))


def apply_rope(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs of ``x`` [B, T, H, D] by :func:`rope_tables`' ``rotation``.

    Each pair is one complex number, so the rotation is one complex product: a handful
    of tensor ops where the pairs' real arithmetic took a dozen, which at one stream's
    few positions cost more than the arithmetic itself.
    """
    b, t, h, d = x.shape
    pairs = torch.view_as_complex(x.float().reshape(b, t, h, d // 2, 2))
    return torch.view_as_real(pairs * rotation).to(x.dtype).view(b, t, h, d)


class KvStore(Protocol):
    """Where one attention layer keeps its keys and values."""

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor,
               pos_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Store new ``k, v`` [B, T, Hkv, D] (rope applied) at query positions ``pos_q`` [B, T].

        Returns keys and values to attend to, [B, Hkv, Tk, D] each, and a mask [B, 1, T, Tk]:
        boolean (True = may attend) or additive in the keys' dtype (0 or -inf).
        """
        ...


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, max_period: float) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.max_period = max_period
        self.in_proj = Linear(dim, (heads + 2 * kv_heads) * head_dim, bias=False)
        self.out_proj = Linear(heads * head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, pos_q: torch.Tensor, store: KvStore, layer: int,
                rope: torch.Tensor | None = None) -> torch.Tensor:
        """``rope``: :func:`rope_tables` of ``pos_q``, if the caller has them already."""
        b, t, _ = x.shape
        d, attn_dim = self.head_dim, self.heads * self.head_dim
        qk_dim = attn_dim + self.kv_heads * d
        projected = self.in_proj(x)
        rotation = rope if rope is not None else rope_tables(pos_q, d, self.max_period)
        # queries and keys side by side in the projection: rotated in one product
        qk = apply_rope(projected[..., :qk_dim].reshape(b, t, self.heads + self.kv_heads, d), rotation)
        q, k = qk.split([self.heads, self.kv_heads], dim=2)
        v = projected[..., qk_dim:].reshape(b, t, self.kv_heads, d)
        keys, values, mask = store.extend(layer, k, v, pos_q)
        if self.kv_heads != self.heads:
            keys = keys.repeat_interleave(self.heads // self.kv_heads, dim=1)
            values = values.repeat_interleave(self.heads // self.kv_heads, dim=1)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, mask)
        return self.out_proj(out.transpose(1, 2).reshape(b, t, attn_dim))


class LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class TransformerLayer(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, head_dim: int, ff_dim: int,
                 max_period: float, layer_scale: bool) -> None:
        super().__init__()
        self.self_attn = Attention(dim, heads, kv_heads, head_dim, max_period)
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        self.linear1 = Linear(dim, ff_dim, bias=False)
        self.linear2 = Linear(ff_dim, dim, bias=False)
        self.layer_scale_1: nn.Module = LayerScale(dim) if layer_scale else nn.Identity()
        self.layer_scale_2: nn.Module = LayerScale(dim) if layer_scale else nn.Identity()

    def forward(self, x: torch.Tensor, pos_q: torch.Tensor, store: KvStore, layer: int,
                rope: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.layer_scale_1(self.self_attn(self.norm1(x), pos_q, store, layer, rope))
        update = self.linear2(F.gelu(self.linear1(self.norm2(x)), approximate="tanh"))
        return x + self.layer_scale_2(update)


class Transformer(nn.Module):
    def __init__(self, num_layers: int, dim: int, heads: int, kv_heads: int, head_dim: int,
                 ff_dim: int, max_period: float = 10000.0, layer_scale: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TransformerLayer(dim, heads, kv_heads, head_dim, ff_dim, max_period, layer_scale)
            for _ in range(num_layers))

    def forward(self, x: torch.Tensor, pos_q: torch.Tensor, store: KvStore) -> torch.Tensor:
        attn = self.layers[0].self_attn
        rope = rope_tables(pos_q, attn.head_dim, attn.max_period)  # the same for every layer
        for index, layer in enumerate(self.layers):
            x = layer(x, pos_q, store, index, rope)
        return x


class CausalWindow:
    """Stateless store: the whole sequence at once, causal within ``context`` steps."""

    def __init__(self, context: int | None) -> None:
        self.context = context

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor,
               pos_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        delta = pos_q[:, :, None] - pos_q[:, None, :]
        mask = delta >= 0
        if self.context is not None:
            mask = mask & (delta < self.context)
        return k.transpose(1, 2), v.transpose(1, 2), mask[:, None]
