"""int8 dynamic quantization of the flow LM's transformer linears.

Weights are int8, activations are quantized on the fly (torch.ao dynamic quantization,
fbgemm on x86, qnnpack on ARM). The flow head and Mimi stay float32: they are small
and the audio is sensitive to them.
"""

from __future__ import annotations

import platform
import warnings

import torch
from torch import nn
from torch.ao.quantization import quantize_dynamic

from engines.pocket.kernels import Linear


def quantize_lm_linears(flow_lm: nn.Module) -> None:
    if platform.machine() in ("arm64", "aarch64"):
        torch.backends.quantized.engine = "qnnpack"
    elif torch.backends.quantized.engine == "none":
        torch.backends.quantized.engine = "fbgemm"
    with warnings.catch_warnings():
        # torch.ao's eager API is deprecated in favour of torchao, which is not a dependency;
        # it still works and is what the reference's own quantize option falls back to.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated", category=UserWarning)
        for layer in flow_lm.transformer.layers:
            _quantize_layer(layer)


def _quantize_layer(layer: nn.Module) -> None:
    attn = layer.self_attn
    attn.in_proj, attn.out_proj = _int8(attn.in_proj), _int8(attn.out_proj)
    layer.linear1, layer.linear2 = _int8(layer.linear1), _int8(layer.linear2)


def _int8(linear: Linear) -> nn.Module:
    return quantize_dynamic(nn.Sequential(linear.plain()), {nn.Linear}, dtype=torch.qint8)[0]
