"""Mimi's SEANet encoder and decoder: the released layout of streaming convs
(``engines.pocket.streaming_conv``), ELUs and residual blocks.

``forward`` runs [B, C, T] (the encoder, a whole signal or with a state); the
decoder streams with ``step`` on [B, T, C] and a :meth:`SeanetDecoder.new_step_state`.

In bf16 (``engines.pocket.decoder_precision``), ELU is ``max(x, exp(min(x, 0)) - 1)``
(the same function, as ``exp(x) - 1 >= x`` for every x <= 0): 2.0 against 2.9 ms for
2M values, as torch's bf16 ELU goes through ``expm1``, its slowest kernel. It rounds
``exp`` to bf16 before subtracting 1, which costs the bf16 decoder about half a
decibel of SNR against fp32 (docs/engines/pocket.md).
"""

from __future__ import annotations

import torch
from torch import nn

from engines.pocket.geometry import SeanetGeometry
from engines.pocket.streaming_conv import ConvState, StreamingConv, StreamingConvTranspose


def elu(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """``F.elu``; in bf16 as ``max(x, exp(min(x, 0)) - 1)`` (see the module's docstring)."""
    if x.dtype != torch.bfloat16:
        return torch.nn.functional.elu(x, inplace=inplace)
    negative = x.clamp(max=0).exp_().sub_(1)
    return torch.maximum(x, negative, out=x if inplace else negative)


class _ResBlock(nn.Module):
    def __init__(self, dim: int, kernel: int, dilation: int, compress: int) -> None:
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([nn.ELU(), StreamingConv(dim, hidden, kernel, dilation=dilation),
                                    nn.ELU(), StreamingConv(hidden, dim, 1)])

    def forward(self, x: torch.Tensor, states: list[torch.Tensor | None]) -> torch.Tensor:
        v = x
        for layer in self.block:
            v = layer(v, states.pop(0)) if isinstance(layer, StreamingConv) else layer(v)
        return x + v

    def step(self, x: torch.Tensor, states: list[torch.Tensor]) -> torch.Tensor:
        v = x
        for layer in self.block:
            # ELU in place on a conv's fresh output; never on ``x``, which the sum needs
            v = layer.step(v, states.pop(0)) if isinstance(layer, StreamingConv) else elu(v, inplace=v is not x)
        return v.add_(x)  # ``v`` is the last conv's fresh output


class _Seanet(nn.Module):
    """Runs ``self.model`` (index layout of the released keys) with a list of states."""

    model: nn.ModuleList

    def streaming_modules(self) -> list[nn.Module]:
        return [m for m in self.modules() if isinstance(m, (StreamingConv, StreamingConvTranspose))]

    def new_state(self, rows: int) -> ConvState:
        return ConvState([torch.zeros(rows, *m.state_shape()) for m in self.streaming_modules()])

    def forward(self, x: torch.Tensor, state: ConvState | None) -> torch.Tensor:
        count = len(self.streaming_modules())
        states: list[torch.Tensor | None] = list(state.tensors) if state else [None] * count
        for layer in self.model:
            if isinstance(layer, _ResBlock):
                x = layer(x, states)
            elif isinstance(layer, (StreamingConv, StreamingConvTranspose)):
                x = layer(x, states.pop(0))
            else:
                x = layer(x)
        return x


class SeanetDecoder(_Seanet):
    """Streams with :meth:`step` (channels last) on a :meth:`new_step_state`."""

    def new_step_state(self, rows: int, dtype: torch.dtype = torch.float32) -> ConvState:
        return ConvState([torch.zeros(rows, *m.step_state_shape(), dtype=dtype) for m in self.streaming_modules()])

    def step(self, x: torch.Tensor, state: ConvState) -> torch.Tensor:
        """[B, T, dimension] -> [B, T * hop, channels]."""
        states = list(state.tensors)
        for layer in self.model:
            if isinstance(layer, _ResBlock):
                x = layer.step(x, states)
            elif isinstance(layer, (StreamingConv, StreamingConvTranspose)):
                x = layer.step(x, states.pop(0))
            else:  # ELU, on a tensor this loop made and nothing else holds
                x = elu(x, inplace=True)
        return x

    def __init__(self, g: SeanetGeometry) -> None:
        super().__init__()
        mult = 2 ** len(g.ratios)
        layers: list[nn.Module] = [StreamingConv(g.dimension, mult * g.n_filters, g.kernel_size)]
        for ratio in g.ratios:
            width = mult * g.n_filters
            layers += [nn.ELU(), StreamingConvTranspose(width, width // 2, 2 * ratio, ratio)]
            layers += [_ResBlock(width // 2, g.residual_kernel_size, g.dilation_base ** j, g.compress)
                       for j in range(g.n_residual_layers)]
            mult //= 2
        layers += [nn.ELU(), StreamingConv(g.n_filters, g.channels, g.last_kernel_size)]
        self.model = nn.ModuleList(layers)


class SeanetEncoder(_Seanet):
    def __init__(self, g: SeanetGeometry) -> None:
        super().__init__()
        mult = 1
        layers: list[nn.Module] = [StreamingConv(g.channels, g.n_filters, g.kernel_size)]
        for ratio in reversed(g.ratios):
            width = mult * g.n_filters
            layers += [_ResBlock(width, g.residual_kernel_size, g.dilation_base ** j, g.compress)
                       for j in range(g.n_residual_layers)]
            layers += [nn.ELU(), StreamingConv(width, width * 2, 2 * ratio, ratio)]
            mult *= 2
        layers += [nn.ELU(), StreamingConv(mult * g.n_filters, g.dimension, g.last_kernel_size)]
        self.model = nn.ModuleList(layers)
