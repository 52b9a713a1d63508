"""The flow head: an adaLN MLP that turns noise into a latent, conditioned on the LM.

Variants (by how they use the head ``v``): ``lsd`` (two time conditions, ``x + v(s, t,
x) / n`` per step), ``flow_matching`` (one time condition, Euler steps), ``drifting``
(``v(x)``) and ``pointwise`` (``x + v(x)``). The norms are written out the way the
released model computes them (unbiased variance in the RMS norm, eps 1e-6 in the
layer norms) so results agree to float rounding.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from engines.pocket.kernels import DerivedTensor, Linear


def _layer_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


class _RmsNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = 1e-5 + x.var(dim=-1, keepdim=True)
        return x * (self.alpha.to(var) * torch.rsqrt(var))


class _TimeEmbedding(nn.Module):
    def __init__(self, dim: int, frequencies: int = 256, max_period: float = 10000.0) -> None:
        super().__init__()
        half = frequencies // 2
        self.register_buffer("freqs", torch.exp(-math.log(max_period) * torch.arange(half) / half))
        self.mlp = nn.Sequential(Linear(frequencies, dim), nn.SiLU(), Linear(dim, dim),
                                 _RmsNorm(dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        args = t * self.freqs.to(t.dtype)
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class _AdaLnBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_ln = nn.Module()
        self.in_ln.weight = nn.Parameter(torch.ones(dim))
        self.in_ln.bias = nn.Parameter(torch.zeros(dim))
        self.mlp = nn.Sequential(Linear(dim, dim), nn.SiLU(), Linear(dim, dim))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), Linear(dim, 3 * dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = self.adaLN_modulation(y).chunk(3, dim=-1)
        h = _layer_norm(x, 1e-6) * self.in_ln.weight + self.in_ln.bias
        return x + gate * self.mlp(h * (1 + scale) + shift)


class _FinalLayer(nn.Module):
    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.linear = Linear(dim, out_dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), Linear(dim, 2 * dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaLN_modulation(y).chunk(2, dim=-1)
        return self.linear(_layer_norm(x, 1e-6) * (1 + scale) + shift)


_TIME_CONDITIONS = {"lsd": 2, "flow_matching": 1, "drifting": 0, "pointwise": 0}


class FlowHead(nn.Module):
    def __init__(self, latent_dim: int, dim: int, cond_dim: int, depth: int, flow_type: str) -> None:
        super().__init__()
        self.flow_type = flow_type
        self.time_embed = nn.ModuleList(_TimeEmbedding(dim) for _ in range(_TIME_CONDITIONS[flow_type]))
        self.cond_embed = Linear(cond_dim, dim)
        self.input_proj = Linear(latent_dim, dim)
        self.res_blocks = nn.ModuleList(_AdaLnBlock(dim) for _ in range(depth))
        self.final_layer = _FinalLayer(dim, latent_dim)
        # Sampling uses a few fixed times (s, t of each LSD step): their embedding, which
        # depends on nothing else, is computed once per weights and per step count.
        self._time_conditions: dict[tuple[float, ...], DerivedTensor] = {}

    def _time_condition(self, times: tuple[float, ...]) -> torch.Tensor:
        """The mean embedding of ``times`` [dim], as ``velocity`` adds it to the condition."""
        cached = self._time_conditions.get(times)
        if cached is None:
            def embed(_weight: torch.Tensor) -> torch.Tensor:
                ts = [torch.full((1, 1), t) for t in times]
                return (sum(e(t) for e, t in zip(self.time_embed, ts, strict=True)) / len(ts))[0]
            cached = self._time_conditions[times] = DerivedTensor(embed)
        return cached.get(self.time_embed[0].mlp[3].alpha)  # a parameter quantization leaves as is

    def velocity(self, cond: torch.Tensor, x: torch.Tensor, *times: torch.Tensor | float) -> torch.Tensor:
        """``times``: one per time condition, all [B, 1] tensors, or all floats (one for every row)."""
        h = self.input_proj(x)
        y = self.cond_embed(cond)
        if times and all(isinstance(t, float) for t in times):
            y = y + self._time_condition(tuple(times))
        elif times:
            y = y + sum(embed(t) for embed, t in zip(self.time_embed, times, strict=True)) / len(times)
        for block in self.res_blocks:
            h = block(h, y)
        return self.final_layer(h, y)

    def sample(self, cond: torch.Tensor, noise: torch.Tensor, steps: int = 1) -> torch.Tensor:
        """Latents [B, latent_dim] for conditions ``cond`` [B, C] from ``noise``."""
        if self.flow_type == "drifting":
            return self.velocity(cond, noise)
        if self.flow_type == "pointwise":
            return noise + self.velocity(cond, noise)
        x = noise
        for i in range(steps):
            if self.flow_type == "lsd":
                x = x + self.velocity(cond, x, i / steps, (i + 1) / steps) / steps
            else:
                x = x + self.velocity(cond, x, i / steps) / steps
        return x
